"""The tuner's prediction of temp memory under a budget, on plain numbers: nothing compiled."""

from __future__ import annotations

from scanrewrite.tune._candidates import Candidate, spending
from scanrewrite.tune._predict import MARGIN, anchor, bases, fill, predict, prune

MIB = 2**20
# A 16-step scan: k = 1 keeps 100 MiB, one stored step adds 10 MiB, chunks of 2 keep 105 MiB.
MEASURED = {Candidate(1): 100 * MIB, Candidate(1, store=1): 110 * MIB, Candidate(2): 105 * MIB}
SPENDING = spending([1, 2], (1, 4, 8, 12), 16)


def test_the_anchor_is_one_stored_step_of_single_steps():
    assert anchor(SPENDING) == Candidate(1, store=1)
    assert anchor([Candidate(2, store=4)]) is None


def test_memory_is_predicted_linear_in_the_stored_steps():
    assert predict(Candidate(1, store=8), MEASURED, 16) == 180 * MIB
    assert predict(Candidate(2, store=4), MEASURED, 16) == 145 * MIB
    # The for-loop's program stores every step.
    assert predict(Candidate(16, store=16), MEASURED, 16) == 250 * MIB
    # Nothing tells: no anchor, or a k not compiled.
    assert predict(Candidate(1, store=8), {Candidate(1): 100 * MIB}, 16) is None
    assert predict(Candidate(3, store=8), MEASURED, 16) is None


def test_prune_leaves_out_what_is_predicted_over_the_budget():
    chosen, skipped = prune(SPENDING, MEASURED, 16, 150 * MIB)
    # k=1: store 4 (140) fits, 8 (180) does not; k=2: store 4 (145) fits; and store 1 of k=2.
    assert chosen == [Candidate(2, store=1), Candidate(1, store=4), Candidate(2, store=4)]
    assert skipped[Candidate(16, store=16)].startswith("not compiled: predicted 250.00 MiB")
    assert Candidate(1, store=12) in skipped and Candidate(2, store=8) in skipped
    # Within the margin a prediction is still compiled: XLA's memory is not exactly linear.
    chosen, _ = prune(SPENDING, MEASURED, 16, int(180 * MIB / (1 + MARGIN)) + 1)
    assert Candidate(1, store=8) in chosen


def test_prune_compiles_only_the_two_largest_stores_that_fit_at_each_k():
    chosen, skipped = prune(SPENDING, MEASURED, 16, 10**6 * MIB)
    assert Candidate(1, store=12) in chosen and Candidate(1, store=8) in chosen
    assert skipped[Candidate(1, store=4)] == "not compiled: store=12 fits too and recomputes less"
    assert Candidate(16, store=16) in chosen
    # Without an anchor nothing is predicted: everything is compiled.
    chosen, skipped = prune(SPENDING, {Candidate(1): 100 * MIB}, 16, 1)
    assert chosen == [c for c in SPENDING] and skipped == {}


def test_a_policy_per_step_is_compiled_first_and_its_stored_steps_predicted_from_it():
    """The policy's program saves 2 MiB a step (132 MiB against k = 1's 100 over 16 steps), so
    each step stored over it adds 10 - 2 = 8 MiB; before it is compiled nothing is predicted."""
    policy = "dots_with_no_batch_dims_saveable"
    found = spending([1], (1, 4, 8), 16, [policy])
    assert bases(found, 16) == [Candidate(16, policy)]
    assert predict(Candidate(16, policy, store=4), MEASURED, 16) is None
    measured = {**MEASURED, Candidate(16, policy): 132 * MIB}
    assert predict(Candidate(16, policy, store=4), measured, 16) == 164 * MIB
    chosen, skipped = prune(found, measured, 16, 150 * MIB)
    assert Candidate(16, policy, store=1) in chosen and Candidate(16, policy, store=8) in skipped


def test_fill_compiles_the_largest_count_the_steepest_rise_says_fits():
    """The temp memory a TPU v5e measured on a 16-layer GPT-style stack (GiB), under 6.5 GiB:
    store=4 fits at both k = 1 and the dots policy on every step, with room for more."""
    gib, policy = 2**30, "dots_with_no_batch_dims_saveable"
    measured = {
        Candidate(1): 1.92 * gib, Candidate(1, store=1): 2.65 * gib, Candidate(1, store=4): 3.73 * gib,
        Candidate(16, policy): 3.52 * gib, Candidate(16, policy, store=1): 3.52 * gib,
        Candidate(16, policy, store=4): 5.09 * gib, Candidate(4): 1.92 * gib, Candidate(16, store=16): 12 * gib,
    }  # fmt: skip
    # k = 1 rose 0.73 GiB for its first stored step: 3 more fit; the policy's steepest rise is
    # 0.52 GiB a step: 2 more. Each with the count above it; k = 4 has no stored count to go by.
    found = [Candidate(1, store=7), Candidate(1, store=8), Candidate(16, policy, store=6), Candidate(16, policy, store=7)]
    assert fill(measured, 16, int(6.5 * gib)) == found
    # Named for what they are: the policy on every step, not k = 16.
    assert [str(c) for c in fill(measured, 16, int(6.5 * gib))][2:] == [f"per-step {policy}, store={s}" for s in (6, 7)]
    # A count measured over the budget caps the ones tried, as does the last step.
    over = {**measured, Candidate(1, store=8): 7 * gib}
    assert Candidate(1, store=8) not in fill(over, 16, int(6.5 * gib))
    assert fill(measured, 16, 100 * gib) == [Candidate(1, store=15), Candidate(16, policy, store=15)]
    # Nothing fits, or nothing yet measured with a stored count: nothing to fill.
    assert fill(measured, 16, gib) == []
    assert fill({Candidate(1): gib}, 16, 10 * gib) == []
