"""The dependency said out loud: after a run that rewrote anything, one line says what the
rewritten code imports and which extra the project must add, unless its `pyproject.toml`
already names it (`scanrewrite.dependencies`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from scanrewrite.dependencies import FLOORS, admits, needed_extras, requirement, specifier
from scanrewrite.targets import TARGETS
from tests.test_cli import NOTE, PLAIN, SCAN, SKIPPED, WOULD_NOTE, invoke, rewritten, write
from tests.test_notebook import make

NNX = "from flax import nnx\n\ny = nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(x, layers)\n"
LINEN = "import flax.linen as nn\n\nStack = nn.scan(Block, variable_axes={'params': 0}, length=3)\n"
FLAX = "nnx.scan,linen.scan"


def note(extras: str = "runtime", where: str = "the dependencies in pyproject.toml", *, would: bool = False) -> str:
    verb = "would import" if would else "imports"
    return f"note: the rewritten code {verb} scanrewrite.runtime: add scanrewrite[{extras}] to {where}"


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("note: ")]


def pyproject(*dependencies: str, optional: dict[str, list[str]] | None = None, name: str = "model") -> str:
    """A PEP 621 `pyproject.toml` (JSON strings are TOML strings)."""
    text = f'[project]\nname = "{name}"\ndependencies = {json.dumps(dependencies)}\n'
    if optional:
        text += "[project.optional-dependencies]\n"
        text += "".join(f"{group} = {json.dumps(entries)}\n" for group, entries in optional.items())
    return text


# --- when the line is said, and when not ----------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        pytest.param(None, NOTE, id="no pyproject.toml"),
        pytest.param("[tool.black]\nline-length = 100\n", NOTE, id="pyproject.toml without dependencies"),
        pytest.param(pyproject("numpy"), note(), id="not named"),
        pytest.param(
            pyproject("scanrewrite>=0.1"),
            note(where="the dependencies in pyproject.toml (the runtime extra is missing)"),
            id="named without the extra",
        ),
        pytest.param(pyproject("scanrewrite-plugins[runtime]"), note(), id="a longer name is another distribution"),
        pytest.param(pyproject("scanrewrite[runtime]>=0.1"), None, id="named"),
        pytest.param(pyproject("Scan_Rewrite [Runtime] ; python_version >= '3.10'"), note(), id="another name"),
        pytest.param(pyproject("ScanRewrite [Runtime] ; python_version >= '3.10'"), None, id="named in another case"),
        pytest.param(pyproject("scanrewrite[runtime] @ git+https://example.com/scanrewrite"), None, id="named by URL"),
        pytest.param(pyproject("jax", optional={"train": ["scanrewrite[runtime]"]}), None, id="optional dependency"),
        pytest.param(pyproject(name="scanrewrite"), None, id="scanrewrite itself"),
        pytest.param(
            '[project]\nname = "model"\ndynamic = ["dependencies"]\n', NOTE, id="dependencies written by a build script"
        ),
        pytest.param(
            '[tool.poetry.dependencies]\npython = "^3.10"\nscanrewrite = {version = "^0.1", extras = ["runtime"]}\n',
            None,
            id="poetry",
        ),
        pytest.param(
            '[tool.poetry.dependencies]\nscanrewrite = [{version = "^0.1", python = "<3.12", extras = ["runtime"]}]\n',
            None,
            id="poetry, several constraints",
        ),
        pytest.param(
            '[tool.poetry.dependencies]\nscanrewrite = "^0.1"\n',
            note(where="the dependencies in pyproject.toml (the runtime extra is missing)"),
            id="poetry without the extra",
        ),
    ],
)
def test_said_unless_the_project_names_the_extra(project: Path, toml: str | None, expected: str | None) -> None:
    write(project, {"a.py": SCAN, **({"pyproject.toml": toml} if toml is not None else {})})
    result = invoke(".")
    assert result.exit_code == 0, result.stderr
    assert notes(result.stderr) == ([expected] if expected else [])
    # Said once, before the summary, which stays the last line.
    assert result.stderr.splitlines()[-1] == "1 file rewritten (1 scan call)"


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        pytest.param(
            pyproject("rich", optional={"flax": ["flax>=0.10"], "torch": ["torch"], "all": ["flax", "torch"]}),
            note("runtime,flax", "the optional dependencies that bring in jax (flax, all) in pyproject.toml"),
            id="flax only in extras (altescy/formed)",
        ),
        pytest.param(
            pyproject("rich", optional={"jax": ["jax[cpu]>=0.4"]}),
            note("runtime,flax", "the optional dependencies that bring in jax (jax) in pyproject.toml"),
            id="jax in an extra",
        ),
        pytest.param(
            pyproject("rich", optional={"flax": ["flax", "scanrewrite"]}),
            note(
                "runtime,flax",
                "the optional dependencies that bring in jax (flax) in pyproject.toml"
                " (the runtime and flax extras are missing)",
            ),
            id="flax in an extra, scanrewrite without extras",
        ),
        pytest.param(
            pyproject("equinox", optional={"flax": ["flax"]}), note("runtime,flax"), id="equinox in the dependencies"
        ),
        pytest.param(
            '[project]\nname = "model"\ndynamic = ["dependencies"]\n[project.optional-dependencies]\nflax = ["flax"]\n',
            note("runtime,flax", "the project's dependencies"),
            id="dependencies written by a build script",
        ),
    ],
)
def test_where_only_extras_bring_in_jax_the_line_names_them(project: Path, toml: str, expected: str) -> None:
    # A framework whose Flax support is an extra (formed: `flax = ["flax>=0.9"]`) runs the
    # rewritten code only with that extra: a requirement in its dependencies would bring jax to
    # every install of it.
    write(project, {"pyproject.toml": toml, "m.py": NNX})
    result = invoke("--targets", FLAX, ".")
    assert result.exit_code == 0, result.stderr
    assert notes(result.stderr) == [expected]


@pytest.mark.parametrize(
    ("dependencies", "optional", "expected"),
    [
        pytest.param((), {}, note("runtime,flax"), id="not named"),
        pytest.param(
            ("scanrewrite[runtime]",),
            {},
            note("runtime,flax", "the dependencies in pyproject.toml (the flax extra is missing)"),
            id="without the flax extra",
        ),
        pytest.param(
            ("scanrewrite",),
            {},
            note("runtime,flax", "the dependencies in pyproject.toml (the runtime and flax extras are missing)"),
            id="without extras",
        ),
        pytest.param(("scanrewrite[flax,runtime]",), {}, None, id="named"),
        pytest.param(("scanrewrite[runtime]",), {"flax": ["scanrewrite[flax]"]}, None, id="the extras in two places"),
    ],
)
def test_flax_scans_need_the_flax_extra(
    project: Path, dependencies: tuple[str, ...], optional: dict[str, list[str]], expected: str | None
) -> None:
    write(project, {"pyproject.toml": pyproject(*dependencies, optional=optional), "a.py": SCAN, "m.py": NNX})
    result = invoke("--targets", f"lax.scan,{FLAX}", ".")
    assert result.exit_code == 0, result.stderr
    assert notes(result.stderr) == ([expected] if expected else [])


# --- the project's pins ---------------------------------------------------------------------------

#: What the line says where a pin is below the runtime's jax.
BELOW = (
    "note: the rewritten code imports scanrewrite.runtime, which needs jax>=0.4.31, equinox>=0.11.5:"
    " pyproject.toml pins {}; raise that pin, then add scanrewrite[runtime]"
)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        pytest.param(pyproject("jax>=0.4.20", "equinox"), note(), id="lower bounds pin nothing"),
        pytest.param(
            pyproject("jax==0.6.2", "jaxlib==0.6.2", "numpy<2"),
            note(where="the dependencies in pyproject.toml (compatible with its jax==0.6.2)"),
            id="jax pinned",
        ),
        pytest.param(
            pyproject("jax[cpu] (>=0.4.30, <0.5) ; python_version >= '3.10'", "equinox~=0.11.10"),
            note(where="the dependencies in pyproject.toml (compatible with its jax>=0.4.30,<0.5 and equinox~=0.11.10)"),
            id="upper bounds, markers",
        ),
        pytest.param(
            pyproject("scanrewrite", "jax==0.6.2"),
            note(
                where="the dependencies in pyproject.toml (the runtime extra is missing; compatible with its jax==0.6.2)"
            ),
            id="scanrewrite without the extra, jax pinned",
        ),
        pytest.param(pyproject("jax==0.4.30"), BELOW.format("jax==0.4.30"), id="jax below the runtime's"),
        pytest.param(pyproject("jax<0.4.31rc1"), BELOW.format("jax<0.4.31rc1"), id="below, a pre-release"),
        pytest.param(
            pyproject("scanrewrite[runtime]", "equinox==0.11.4", "jax==0.4.30"),
            BELOW.format("equinox==0.11.4 and jax==0.4.30").replace("that pin", "those pins"),
            id="below, with the extra named",
        ),
        pytest.param(
            pyproject("rich", optional={"train": ["jax~=0.4.20", "scanrewrite[runtime]"]}), None, id="compatible, named"
        ),
        pytest.param(
            '[tool.poetry.dependencies]\njax = "^0.4.20"\nequinox = {version = "0.11.4"}\n',
            BELOW.format('equinox = "0.11.4"'),
            id="poetry",
        ),
        pytest.param(
            '[tool.poetry.dependencies]\njax = "^0.6"\n',
            note(where='the dependencies in pyproject.toml (compatible with its jax = "^0.6")'),
            id="poetry, compatible",
        ),
    ],
)
def test_the_requirement_never_raises_the_projects_pins(project: Path, toml: str, expected: str | None) -> None:
    """Where the project pins jax or equinox, the line says the requirement is compatible with
    those pins, or which pin is below what the runtime needs, instead of a requirement that a
    resolver can only meet by moving it."""
    write(project, {"pyproject.toml": toml, "a.py": SCAN})
    result = invoke(".")
    assert result.exit_code == 0, result.stderr
    assert notes(result.stderr) == ([expected] if expected else [])


def test_pins_in_a_subprocess(project: Path) -> None:
    write(project, {"pyproject.toml": pyproject("jax==0.4.30"), "a.py": SCAN})
    done = subprocess.run(
        [sys.executable, "-m", "scanrewrite", "--diff", "a.py"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert notes(done.stderr) == [BELOW.format("jax==0.4.30").replace(" imports ", " would import ")]


def test_flax_pins_are_read_for_flax_scans(project: Path) -> None:
    write(project, {"pyproject.toml": pyproject("flax==0.9.0", "jax==0.6.2"), "m.py": NNX})
    result = invoke("--targets", FLAX, "--check", ".")
    assert notes(result.stderr) == [
        "note: the rewritten code would import scanrewrite.runtime, which needs jax>=0.4.31, equinox>=0.11.5,"
        " flax>=0.10.0: pyproject.toml pins flax==0.9.0; raise that pin, then add scanrewrite[runtime,flax]"
    ]
    write(project, {"pyproject.toml": pyproject("flax==0.10.6", "jax==0.6.2")})
    assert notes(invoke("--targets", FLAX, "--check", ".").stderr) == [
        note(
            "runtime,flax", "the dependencies in pyproject.toml (compatible with its flax==0.10.6 and jax==0.6.2)", would=True
        )
    ]


#: PEP 440 specifiers, each clause against the floor 0.4.31.
SPECIFIERS = [
    "==0.4.30", "==0.4.31", "===0.4.31", "==0.6.2", "<0.4.31", "<0.4.32", "<=0.4.31", "<=0.4.30.post1",
    "~=0.4.20", "~=0.3.5", "~=0.4", "~=0.3", "==0.4.*", "==0.3.*", "==0.4.31rc1", "<=0.4.31.dev0",
    "==0.4.31.post1", "==0.4.32rc1", "<0.4.31rc1", ">=0.4.20,<0.5", ">=0.4,<0.4.30", "<1", "==1.*",
    ">=0.4.20", ">0.5", "!=0.4.31", "",
]  # fmt: skip


@pytest.mark.parametrize("spec", SPECIFIERS)
def test_pins_are_read_as_pep_440_reads_them(spec: str) -> None:
    """`admits` agrees with `packaging` on whether each clause lets a release at or above the
    floor in (None: no clause bounds the version from above)."""
    releases = ("0.4.31", "0.4.31.post1", "0.4.32rc1", "0.4.32", "0.4.99", "0.5", "0.6.2", "0.10.2", "1.0", "3.0")
    above = [Version(text) for text in releases]
    clauses = [SpecifierSet(clause, prereleases=True) for clause in spec.split(",") if clause]
    bounded = [clause for clause in clauses if not str(clause).startswith((">", "!"))]
    expected = all(any(version in clause for version in above) for clause in bounded) if bounded else None
    assert admits(spec, "0.4.31") is expected
    assert specifier(f"jax[cpu] ({spec}) ; os_name == 'posix'") == spec.strip()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0.4.30", False),
        ("0.4.31", True),
        ("^0.4.20", True),
        ("^0.3", False),
        ("^0.0.9", False),
        ("^1", True),
        ("~0.4.2", True),
        ("~0.3", False),
        ("~0", True),
        ("*", None),
        (">=0.4.20", None),
    ],
)
def test_poetrys_pins(spec: str, expected: bool | None) -> None:
    assert admits(spec, "0.4.31") is expected


def test_the_floors_are_scanrewrites_lower_bounds() -> None:
    root = Path(__file__).resolve().parent.parent
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floors = {}
    for extra in FLOORS:
        for text in declared[extra]:
            (bound,) = Requirement(text).specifier
            assert bound.operator == ">="
            floors.setdefault(extra, {})[canonicalize_name(Requirement(text).name)] = bound.version
    assert floors == FLOORS


def test_a_linen_scan_in_a_notebook_needs_the_flax_extra(project: Path) -> None:
    write(project, {"nb.ipynb": make(LINEN)})
    result = invoke("--targets", FLAX, "--check", ".")
    assert result.exit_code == 1
    assert notes(result.stderr) == [note("runtime,flax", "the project's dependencies", would=True)]
    # A Flax target asked for but no Flax scan rewritten: the runtime extra is enough.
    write(project, {"nb.ipynb": make(SCAN)})
    assert notes(invoke("--targets", f"lax.scan,{FLAX}", "--check", ".").stderr) == [WOULD_NOTE]


@pytest.mark.parametrize("args", [["--check"], ["--diff"], ["--check", "--diff"], ["--cell-diff"]])
def test_says_would_when_nothing_is_written(project: Path, args: list[str]) -> None:
    write(project, {"a.py": SCAN, "pyproject.toml": pyproject("numpy")})
    result = invoke(*args, ".")
    assert notes(result.stderr) == [note(would=True)]
    assert (project / "a.py").read_text() == SCAN


@pytest.mark.parametrize(
    ("files", "args"),
    [
        pytest.param({"a.py": SCAN}, ["-q"], id="quiet"),
        pytest.param(
            {"pyproject.toml": "[tool.scanrewrite]\nquiet = true\n", "a.py": SCAN}, [], id="quiet, configured"
        ),
        pytest.param({"a.py": PLAIN}, [], id="nothing to rewrite"),
        pytest.param({"a.py": rewritten(SKIPPED)}, [], id="only a call skipped"),
        pytest.param({"a.py": rewritten(SCAN)}, ["--revert"], id="revert"),
        pytest.param({"a.py": rewritten(SCAN)}, ["--revert", "--check"], id="revert, check"),
    ],
)
def test_not_said(project: Path, files: dict[str, str | bytes], args: list[str]) -> None:
    write(project, files)
    result = invoke(*args, ".")
    assert result.exit_code in (0, 1), result.stderr
    assert notes(result.stderr) == []


def test_stdin_names_the_file_and_its_project(project: Path) -> None:
    write(project, {"sub/pyproject.toml": pyproject("numpy")})
    result = invoke("--stdin-filename", "sub/m.py", "-", input=SCAN.encode())
    assert notes(result.stderr) == [note(where="the dependencies in sub/pyproject.toml")]
    assert result.stdout_bytes == rewritten(SCAN)
    write(project, {"sub/pyproject.toml": pyproject("scanrewrite[runtime]")})
    assert notes(invoke("--stdin-filename", "sub/m.py", "-", input=SCAN.encode()).stderr) == []


def test_the_projects_own_pyproject_even_with_another_configuration(project: Path) -> None:
    # --config says where the options come from; the dependencies are the project's.
    write(
        project,
        {"pyproject.toml": pyproject("scanrewrite[runtime]"), "other.toml": "[tool.scanrewrite]\n", "a.py": SCAN},
    )
    assert notes(invoke("--config", "other.toml", ".").stderr) == []


def test_once_for_many_files_in_a_process_pool(project: Path) -> None:
    write(project, {"pyproject.toml": pyproject("numpy"), **{f"pkg/m{i}.py": SCAN for i in range(4)}, "pkg/n.py": NNX})
    done = subprocess.run(
        [sys.executable, "-m", "scanrewrite", "-j2", "--targets", f"lax.scan,{FLAX}", "pkg"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-2:] == [note("runtime,flax"), "5 files rewritten (5 scan calls)"]


# --- the parts -----------------------------------------------------------------------------------


REQUIREMENTS = [
    "scanrewrite",
    "scanrewrite[runtime]>=0.1",
    "ScanRewrite [ Runtime , FLAX ] >= 0.1 ; python_version>='3.10'",
    "scanrewrite[]",
    "scanrewrite[a,]",
    "scanrewrite-plugins",
    "scanrewrite_x[runtime]",
    "scanrewrite @ https://example.com/scanrewrite.whl",
    "scanrewrite[runtime]@ git+https://example.com/x",
    "scanrewrite (>=0.1)",
    "scanrewrite[runtime",
    "scanrewrite runtime",
    "-scanrewrite",
    "scanrewrite==1.0",
    "scanrewrite~=1.0",
    "scan.rewrite[Run_Time]",
    "scanrewrite;python_version<'3'",
    "",
    " ",
    "scanrewrite[a b]",
    "scanrewrite[runtime]  ",
    "scanrewrite[a][b]",
    "scanrewrite.",
    "scanrewrite[ru..ntime]",
]


@pytest.mark.parametrize("text", REQUIREMENTS)
def test_requirements_are_read_as_pep_508_reads_them(text: str) -> None:
    try:
        parsed = Requirement(text)
    except InvalidRequirement:
        expected = None
    else:
        expected = (canonicalize_name(parsed.name), frozenset(canonicalize_name(extra) for extra in parsed.extras))
    assert requirement(text) == expected


def test_every_extra_a_target_needs_is_one_of_scanrewrites() -> None:
    root = Path(__file__).resolve().parent.parent
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {extra for target in TARGETS for extra in target.extras} <= set(declared)
    assert needed_extras(["jax.lax.scan", "equinox.internal.scan"]) == ("runtime",)
    assert needed_extras(["flax.linen.scan", "jax.lax.scan"]) == ("runtime", "flax")
    assert needed_extras([]) == ()
