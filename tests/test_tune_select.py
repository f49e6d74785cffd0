"""The tuner's choice, budget and candidates as plain data: no jax, nothing compiled."""

from __future__ import annotations

import pytest

from scanrewrite.settings import ORIGINAL, Original, Settings
from scanrewrite.tune._budget import Budget
from scanrewrite.tune._candidates import (
    ORIGINAL_SCAN,
    ROLLED_SPENDING_POLICIES,
    Candidate,
    candidates,
    default_stores,
    spending,
    spending_policies,
)
from scanrewrite.tune._choose import OVER_BUDGET, Option, Timing, changes, choose
from scanrewrite.tune._errors import TuneError
from scanrewrite.tune._options import (
    parse_ks,
    parse_levels,
    parse_policies,
    parse_stores,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2GiB", Budget(bytes=2 * 2**30), id="gib"),
        pytest.param("500MB", Budget(bytes=500 * 10**6), id="mb"),
        pytest.param("1.5 mib", Budget(bytes=int(1.5 * 2**20)), id="fractional-mib"),
        pytest.param("123456", Budget(bytes=123456), id="bytes-str"),
        pytest.param(4096, Budget(bytes=4096), id="bytes-int"),
        pytest.param("0.5x", Budget(fraction=0.5), id="fraction-x"),
        pytest.param("50%", Budget(fraction=0.5), id="percent"),
        pytest.param("0.8", Budget(device=0.8), id="device-fraction"),
        pytest.param(0.8, Budget(device=0.8), id="device-fraction-float"),
        pytest.param("1", Budget(device=1.0), id="all-of-the-device"),
        pytest.param("12GiB", Budget(bytes=12 * 2**30), id="twelve-gib"),
        pytest.param(None, None, id="none"),
    ],
)
def test_budget_parse(text, expected):
    assert Budget.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("lots", id="word"),
        pytest.param("2 parsecs", id="unit"),
        pytest.param("0x", id="zero"),
        pytest.param("-1GiB", id="negative"),
        pytest.param(True, id="bool"),
    ],
)
def test_budget_parse_rejects(text):
    with pytest.raises(TuneError, match="memory budget"):
        Budget.parse(text)


def test_budget_limit():
    assert Budget(fraction=0.5).limit(1000) == 500
    assert Budget(fraction=0.5).limit(None) is None
    assert Budget(bytes=10).limit(1000) == 10
    assert Budget(device=0.8).limit(1000, 16 * 2**30) == int(0.8 * 16 * 2**30)
    assert str(Budget(device=0.8)) == "0.8 of the device's memory"
    # A fraction is of every site as written, a Flax scan's as much as a lax.scan's.
    assert str(Budget(fraction=1.02)) == "1.02x the original program's memory"


def test_a_device_fraction_needs_a_device_that_reports_its_memory():
    with pytest.raises(TuneError, match="reports no memory size"):
        Budget(device=0.8).limit(1000, None)


def test_stored_steps_and_the_for_loop_under_a_budget():
    assert default_stores(16) == (1, 4, 8, 12)
    assert default_stores(2) == (1,)
    assert default_stores(None) == ()
    assert parse_stores("auto") is None
    assert parse_stores("1, 4,4") == (1, 4)
    assert parse_stores("") == ()
    for bad in ("0", "some", [True]):
        with pytest.raises(TuneError, match="stored steps"):
            parse_stores(bad)
    found = spending([1, 2], (1, 8, 16), 16)
    # Named for what they are, not for a k = 16 nobody asked for.
    assert [str(c) for c in found] == [
        "k=1, store=1", "k=2, store=1", "k=1, store=8", "k=2, store=8", "for-loop program",
    ]
    assert found[-1] == Candidate(16, store=16) and str(Candidate(16, store=16)) == "k=16, store=16"
    assert spending([1], (1,), None) == []
    assert spending([1], (), 16) == []  # no stored steps, not every step either
    # A rolled policy at every k first; a policy per step, alone and with each stored count,
    # before the for-loop: the runtime's two that keep dots and reductions, then those named.
    policies = spending_policies([False, True, "everything_saveable", "dots_and_reductions_saveable"])
    found = spending([1, 16], (1, 8), 16, policies, ROLLED_SPENDING_POLICIES)
    assert [str(c) for c in found] == [
        "k=1, reductions_saveable", "k=1, store=1", "k=1, store=8",
        "per-step dots_with_no_batch_dims_and_reductions_saveable",
        "per-step dots_with_no_batch_dims_and_reductions_saveable, store=1",
        "per-step dots_with_no_batch_dims_and_reductions_saveable, store=8",
        "per-step dots_and_reductions_saveable", "per-step dots_and_reductions_saveable, store=1",
        "per-step dots_and_reductions_saveable, store=8",
        "per-step everything_saveable", "per-step everything_saveable, store=1", "per-step everything_saveable, store=8",
        "for-loop program",
    ]  # fmt: skip
    # A k = 16 asked for is named so, and is the same candidate.
    assert str(Candidate(16, "everything_saveable")) == "k=16, everything_saveable" and Candidate(16, "everything_saveable") in found
    assert spending([1], (), 16, policies, ROLLED_SPENDING_POLICIES) == []  # no stored steps: no spending


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            dict(written=4, has_checkpoint=True), ["k=1", "k=2", "k=4"], id="written-among-ks"
        ),
        pytest.param(dict(written=3, has_checkpoint=True), ["k=1", "k=2", "k=4", "k=3"], id="written-added"),
        pytest.param(dict(written=True, has_checkpoint=True), ["k=1", "k=2", "k=4"], id="written-bool-not-added"),
    ],
)
def test_candidates(kwargs, expected):
    assert [str(c) for c in candidates([1, 2, 4, 2], (), **kwargs)] == expected


def test_candidates_with_checkpoint_modes_only_where_the_call_takes_checkpoint():
    scan = candidates([1, 2], (False, "dots_saveable"), written=1, has_checkpoint=True)
    assert [str(c) for c in scan] == [
        "k=1", "k=2", "k=1, checkpoint=False", "k=2, checkpoint=False", "k=1, dots_saveable", "k=2, dots_saveable",
    ]
    eqxi = candidates([1, 2], (False,), written=1, has_checkpoint=False)
    assert eqxi == [Candidate(1), Candidate(2)]


def test_candidates_with_levels_and_the_original():
    found = candidates([1, 2], (False,), written=1, has_checkpoint=True, levels=(2, "auto"), original=True)
    assert [str(c) for c in found] == [
        "k=1", "k=2", "k=1, levels=2", "k=2, levels=2", "k=1, levels=auto", "k=2, levels=auto",
        # Without checkpointing, levels change nothing: not tried.
        "k=1, checkpoint=False", "k=2, checkpoint=False",
        "original scan",
    ]
    assert found[-1] is ORIGINAL_SCAN and ORIGINAL_SCAN.original and not found[0].original
    unchecked = candidates([1], ("dots_saveable",), written=1, has_checkpoint=True, levels=(2,), checkpointed=False)
    assert [str(c) for c in unchecked] == ["k=1", "k=1, dots_saveable", "k=1, dots_saveable, levels=2"]


def test_parse_levels():
    assert parse_levels("1, 2,auto,2") == (1, 2, "auto")
    assert parse_levels([2, "auto"]) == (2, "auto")
    assert parse_levels("") == ()
    for bad in ("0", "deep", [True], [1.5]):
        with pytest.raises(TuneError, match="levels are positive ints or 'auto'"):
            parse_levels(bad)


def test_parse_policies_and_ks():
    # The modes that name no policy are as `Settings.checkpoint` holds them.
    assert parse_policies("none, checkpoint,dots_saveable,") == (False, True, "dots_saveable")
    assert parse_policies([False, "dots_saveable", "none"]) == (False, "dots_saveable")
    assert parse_policies("") == ()
    with pytest.raises(TuneError, match="unknown checkpoint mode 'dots'"):
        parse_policies("dots")
    assert parse_ks([4, 1, 4]) == (4, 1)
    with pytest.raises(TuneError, match="positive int"):
        parse_ks([0])


def option(
    k: int | Original,
    times: tuple[float, ...],
    temp: int | None,
    error: str | None = None,
    differs=False,
    written=False,
    program=None,
) -> Option:
    return Option(Candidate(k), None if error else Timing(times), temp, error, differs, written, program)


@pytest.mark.parametrize(
    ("options", "limit", "pick", "reason"),
    [
        pytest.param([option(1, (2.0,), 10), option(2, (1.0,), 20)], None, 2, "fastest", id="fastest"),
        pytest.param(
            [option(1, (2.0,), 10), option(2, (1.0,), 20)], 15, 1, "fastest within the memory budget", id="budget"
        ),
        pytest.param(
            [option(1, (1.0, 1.1, 1.2, 1.3), 10), option(2, (1.0, 1.1, 1.15, 1.2), 20)], None, 1,
            "less memory than k=2 at the same speed within noise", id="tie-within-noise-less-memory",
        ),
        pytest.param(
            [option(1, (2.0, 2.0, 2.0), 10), option(2, (1.0, 1.0, 1.0), 20)], None, 2, "fastest",
            id="no-noise-no-tie",
        ),
        pytest.param(
            # On the CPU, k = 2, 4 and 6 can build one program (the fitted chunk size).
            [option(6, (1.0, 1.1, 1.2, 1.3), 10), option(4, (1.05, 1.1, 1.2, 1.3), 10, written=True)], None, 4,
            "as written: as fast as k=6 within noise, at the same memory", id="tie-keeps-the-written-setting",
        ),
        pytest.param(
            [option(6, (1.0, 1.1, 1.2, 1.3), 10), option(4, (1.05, 1.1, 1.2, 1.3), 20, written=True)], None, 6,
            "fastest", id="tie-with-more-memory-changes-the-written-setting",
        ),
        pytest.param(
            [option(2, (1.0, 1.0), 10, program="p"), option(4, (1.2, 1.2), 10, written=True, program="p")], None, 4,
            "as written: the same program as k=2", id="same-program-keeps-the-written-setting",
        ),
        pytest.param(
            [option(2, (1.0, 1.0), 10, program="p"), option(4, (1.2, 1.2), 10, written=True, program="q")], None, 2,
            "fastest", id="another-program-is-picked",
        ),
        pytest.param([option(1, (1.0,), 30), option(2, (2.0,), 20)], 5, 2, OVER_BUDGET, id="nothing-fits"),
        pytest.param(
            [option(1, (), None, "failed to compile: boom"), option(2, (2.0,), 20)], None, 2, "fastest",
            id="failed-skipped",
        ),
        pytest.param(
            [option(1, (1.0,), 10, differs=True), option(2, (2.0,), 20)], None, 2, "fastest", id="differs-never-picked"
        ),
        pytest.param(
            [option(1, (1.0, 1.1, 1.2, 1.3), 10), option(ORIGINAL, (1.05, 1.1, 1.2, 1.3), 30)], None, ORIGINAL,
            "as fast as k=1 within noise: the rewrite does not help here", id="original-within-noise-wins",
        ),
        pytest.param(
            [option(1, (1.0, 1.1, 1.2, 1.3), 10), option(ORIGINAL, (1.0, 1.1, 1.2, 1.3), 30)], 20, 1,
            "fastest within the memory budget", id="original-over-budget-loses",
        ),
        pytest.param(
            [option(1, (1.0, 1.0), 10), option(ORIGINAL, (2.0, 2.0), 30)], None, 1, "fastest", id="original-slower-loses"
        ),
        pytest.param(
            # Timed apart, one program can measure apart (the first call, load); it is one program.
            [option(8, (1.0, 1.0), 10, program="p"), option(ORIGINAL, (2.0, 2.0), 10, program="p")], None, ORIGINAL,
            "the same program as k=8: the rewrite does not help here", id="original-same-program-wins",
        ),
    ],
)
def test_choose(options, limit, pick, reason):
    chosen, why = choose(options, limit)
    assert chosen.candidate.unroll == pick
    assert why == reason


def test_a_tie_at_the_same_memory_goes_to_the_setting_closest_to_what_is_written():
    # Written `unroll=2`; under a budget, store=2 at k = 1, 2 and 4 tie within noise at the same
    # memory (on the CPU they can be one program). Writing k=2, store=2 changes one setting.
    noisy = (1.0, 1.1, 1.2, 1.3)
    stored = [
        Option(Candidate(k, store=2), Timing(times), 10, changes=changes(Candidate(k, store=2), Settings(2)))
        for k, times in ((1, noisy), (4, (1.05, 1.1, 1.2, 1.3)), (2, (1.1, 1.15, 1.2, 1.3)))
    ]
    written = Option(Candidate(2), Timing((2.0, 2.1, 2.2, 2.3)), 30, written=True, changes=0)
    chosen, why = choose([written, *stored], 20)
    assert chosen.candidate == Candidate(2, store=2)
    assert why == "closest to what is written: as fast as k=1, store=2 within noise, at the same memory"
    # Less memory still wins over closeness; and the fastest stands where it is the closest.
    less = Option(Candidate(4, store=2), Timing((1.05, 1.1, 1.2, 1.3)), 9, changes=2)
    assert choose([written, *stored[:1], stored[2], less], 20)[0] is less
    assert choose([written, stored[2]], 20) == (stored[2], "fastest within the memory budget")


def test_changes_counts_the_settings_a_pick_writes():
    written = Settings(2, True, 1, 0)
    assert changes(Candidate(2), written) == 0
    assert changes(Candidate(1), written) == 1
    assert changes(Candidate(1), Settings(True)) == 1 and changes(Candidate(1), Settings(1)) == 0
    assert changes(Candidate(2, "dots_saveable", 2, store=3), written) == 3
    assert changes(Candidate(8, "dots_saveable", store=3), written) == 3
    # A setting given as written (or as the default the call leaves) changes nothing.
    assert changes(Candidate(2, True, 1, store=0), Settings(2)) == 0
    assert changes(ORIGINAL_SCAN, written) == 4


def test_choose_with_nothing_that_ran():
    assert choose([option(1, (), None, "failed to compile: x")], None) == (None, "no candidate ran")
    assert choose([option(1, (1.0,), 3, differs=True)], None) == (None, "no candidate verified")


def test_timing_noise_is_half_the_interquartile_range():
    assert Timing((1.0,)).noise == 0.0
    assert Timing((1.0, 3.0)).noise == pytest.approx(0.5)
    assert Timing((1.0, 2.0, 3.0, 4.0, 100.0)).noise == pytest.approx(1.0)
    assert Timing((3.0, 1.0, 2.0)).median == 2.0


def test_the_original_at_every_site_is_named_by_the_api_the_sites_share():
    from scanrewrite.tune._report import originals_label

    assert originals_label(["scan", "scan"]) == "lax.scan at every site"
    assert originals_label(["nnx_scan"]) == "flax.nnx.scan at every site"
    assert originals_label(["eqxi_scan"]) == "equinox.internal.scan at every site"
    assert originals_label(["scan", "linen_scan"]) == "the original at every site"
