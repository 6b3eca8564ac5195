"""docs/report-schema.json describes what dumpkit writes: the analyze, info and stack
documents of every sample dump (and of every real dump, when ../shared is beside the
repository), triage documents and the committed report snapshots are valid under it; it
refuses what dumpkit does not write; its enums are dumpkit's own."""

from __future__ import annotations

import copy
import json

import pytest

from tests.support.samples import REAL_DUMPS, SAMPLES, SAMPLE_BIN, WINPYTHON, real_dumps, run_cli
from tests.golden.snapshot import HERE as GOLDEN
from tests.support.schema import KINDS, SCHEMA, documents, problems, validator

# Every sample dump, the Python and per-version ones and the bundles included.
SAMPLE_DUMPS = sorted(
    p for pattern in ("**/*.dmp", "**/*.dmp.xz", "**/*.dkb") for p in SAMPLES.glob(pattern) if p.is_file()
)


def _images(dump):
    """What each sample's tests give it: the images built beside it."""
    folder = dump.parent
    if folder == SAMPLES:
        return [SAMPLE_BIN]
    if folder.name == "python":
        return [WINPYTHON] if WINPYTHON.is_dir() else []
    if (folder / "bin").is_dir():
        return [folder / "bin"]
    return []


# A million-frame stack document is ~150 MB of JSON, a gigabyte as Python objects, and
# minutes of jsonschema: the walk stops at 50,000 frames instead (`--max-frames`), as a
# user's would, and the frames past it are written by the same code as those before.
MAX_FRAMES = {"deep_recursion_1m.dmp.xz": 50_000}


@pytest.fixture(scope="module")
def sample_documents(plain):
    cache = {}

    def get(dump, kinds=("analyze", "info")):
        key = (dump, kinds)
        if key not in cache:
            cache[key] = documents(plain(dump), _images(dump), kinds, MAX_FRAMES.get(dump.name))
        return cache[key]

    return get


def _assert_valid(doc, kind, what):
    assert doc["schema"] == f"dumpkit-{kind}", what
    found = problems(doc, kind)
    assert not found, f"{what}: {kind} document not valid under docs/report-schema.json:\n" + "\n".join(found)


def _sample_cases():
    """Every sample; the TensorFlow bundles take seconds each to analyse, so they are the
    full run's (the other Python samples hold the same sections)."""
    for p in SAMPLE_DUMPS:
        slow = p.suffix == ".dkb" and p.name.startswith("tf_")
        yield pytest.param(p, id=str(p.relative_to(SAMPLES)), marks=pytest.mark.slow if slow else ())


@pytest.mark.parametrize("dump", list(_sample_cases()))
def test_sample_analyze_and_info_documents_are_valid(dump, sample_documents):
    for kind, doc in sample_documents(dump).items():
        _assert_valid(doc, kind, dump.name)


def _stack_cases():
    """Every sample; the fast tier's are small stacks that between them hold every shape a
    frame and a Python stack take. jsonschema takes seconds over a recursion's tens of
    thousands of frames (a minute over a million), so the others are the full run's."""
    small = {
        "big_frame.dmp",  # x64, frame sizes and a probe
        "fastfail_abort.dmp",
        "msvc/msvc_pdb_av.dmp.xz",  # frames named by a PDB, with source lines
        "python/faulthandler_null.dmp",  # a Python process
        "python/numpy_strided_av.dmp",
        "pyversions/thread_av_py313.trimmed.dmp.xz",  # Python stacks read (full memory)
    }
    for p in SAMPLE_DUMPS:
        name = str(p.relative_to(SAMPLES))
        yield pytest.param(p, id=name, marks=() if name in small else pytest.mark.slow)


@pytest.mark.parametrize("dump", list(_stack_cases()))
def test_sample_stack_documents_are_valid(dump, sample_documents):
    docs = sample_documents(dump, ("stack",))
    if "stack" not in docs:
        pytest.skip(f"{dump.name}: neither x64 nor x86, so `dumpkit stack` does not walk it")
    _assert_valid(docs["stack"], "stack", dump.name)


REAL = real_dumps()


# three documents of each of the ~30 dumps: ~2 s in all, made in this process
@pytest.mark.parametrize("dump", REAL, ids=[str(p.relative_to(REAL_DUMPS)) for p in REAL])
def test_real_dump_documents_are_valid(dump):
    from dumpkit.commands.exits import Exit

    try:
        docs = documents(dump)
    except Exit:
        pytest.skip(f"{dump.name}: the CLI refuses it as unusable (exit 2)")
    for kind, doc in docs.items():
        _assert_valid(doc, kind, dump.name)


GOLDENS = sorted(GOLDEN.glob("*.json"))


@pytest.mark.parametrize("snapshot", GOLDENS, ids=[p.name for p in GOLDENS])
def test_report_snapshots_are_valid(snapshot):
    """tests/golden holds the analyze reports of every sample and real dump: what
    test_golden.py compares today's reports with, so a report that left the schema cannot
    be committed as a snapshot either."""
    _assert_valid(json.loads(snapshot.read_text()), "analyze", snapshot.name)


def test_each_command_names_its_schema(tmp_path):
    """What a user reads from the CLI: each command's JSON names its schema and is valid
    under it, and under the whole schema (which tells the four documents apart by name)."""
    dump = SAMPLES / "fastfail_abort.dmp"
    damaged = tmp_path / "truncated.dmp"
    damaged.write_bytes(dump.read_bytes()[:100])  # a triage record that could not be analysed
    commands = {
        "analyze": ["analyze", dump, "--image-path", SAMPLE_BIN, "--format", "json"],
        "info": ["info", dump, "--json"],
        "stack": ["stack", dump, "--image-path", SAMPLE_BIN, "--json"],
        # a Python recursion (full memory): its group lists the Python functions
        "triage": [
            "triage",
            dump,
            SAMPLES / "python" / "py_recursion_full.trimmed.dmp.xz",
            damaged,
            "--format",
            "json",
        ],
    }
    for kind, args in commands.items():
        r = run_cli(*args)
        assert r.returncode in (0, 1), (kind, r.stderr)
        doc = json.loads(r.stdout)
        _assert_valid(doc, kind, kind)
        assert not problems(doc), kind
        for other in set(KINDS) - {kind}:
            assert problems(doc, other), f"a {kind} document passes as {other}"
        if kind == "triage":
            assert {d["status"] for d in doc["dumps"]} == {"analysed", "error"}
            assert all(d["verdict"] is None for d in doc["dumps"] if d["status"] == "error")
            assert [len(g["python_recursions"]) for g in doc["groups"]] in ([0, 1], [1, 0])


@pytest.fixture(scope="module")
def report():
    return json.loads((GOLDEN / "sample--recursion_cycle3.dmp.json").read_text())


def _without(doc, *path):
    *parents, last = path
    for key in parents:
        doc = doc[key]
    del doc[last]


def _setting(doc, value, *path):
    *parents, last = path
    for key in parents:
        doc = doc[key]
    doc[last] = value


@pytest.mark.parametrize(
    "change,refused_at",
    [
        (lambda d: _without(d, "verdict"), "(top)"),  # a required key
        (lambda d: _without(d, "threads", 0, "frames", 0, "trust"), "threads/0/frames/0"),
        (lambda d: _setting(d, "stack", "schema"), "schema"),  # another document's name
        (lambda d: _setting(d, 2, "schema_version"), "schema_version"),
        (lambda d: _setting(d, "crashed", "verdict", "kind"), "verdict/kind"),
        (lambda d: _setting(d, "certain", "verdict", "confidence"), "verdict/confidence"),
        (lambda d: _setting(d, "guessed", "threads", 0, "frames", 0, "trust"), "threads/0/frames/0/trust"),
        (lambda d: _setting(d, 4096, "threads", 0, "frames", 0, "ip"), "threads/0/frames/0/ip"),  # not "0x..."
        (lambda d: _setting(d, "0X1000", "threads", 0, "frames", 0, "sp"), "threads/0/frames/0/sp"),
        (lambda d: _setting(d, "7", "dump", "thread_count"), "dump/thread_count"),
        (lambda d: _setting(d, None, "verdict"), "verdict"),  # null only where the code allows it
        (lambda d: _setting(d, 1, "threads", 0, "frames", 0, "frame_size"), "threads/0/frames/0"),  # unknown key
        (lambda d: _setting(d, ["rax", "0x0", "0x1"], "crash", "registers", 0), "crash/registers/0"),
    ],
)
def test_the_schema_refuses_what_dumpkit_does_not_write(report, change, refused_at):
    assert not problems(report, "analyze")
    doc = copy.deepcopy(report)
    change(doc)
    found = problems(doc, "analyze")
    assert found and all(p.startswith(refused_at + ":") for p in found), found


def _enum(name):
    return SCHEMA["$defs"][name]["enum"]


def test_the_schemas_enums_are_dumpkits_own():
    """Enum values come from the code that makes them: a new verdict kind, confidence, trust
    level, Python reader status... fails here until the schema (and the doc, see
    test_report_schema_doc.py) say it too."""
    from dumpkit.analysis.blame import (
        ABOVE_RECURSION,
        DELAY_LOAD_HELPER,
        OUTSIDE_MODULES,
        RUNTIME_CODE,
        SCANNED,
        WAY_OUT,
    )
    from dumpkit.analysis.moduleroles import C_RUNTIME, PYTHON_RUNTIME, SYSTEM
    from dumpkit.analysis.model import EndingRoute, ReasonKind
    from dumpkit.analysis.model import SCHEMA_VERSION, CollisionKind, Confidence, PythonTrust, VerdictKind
    from dumpkit.analysis.python import PROTOCOLS
    from dumpkit.cpython.model import Status
    from dumpkit.report.json_report import SCHEMA_NAMES
    from dumpkit.report.view import triage as triage_view
    from dumpkit.triage.record import ANALYSED, FAILED, TIMED_OUT
    from dumpkit.unwind.frames import Support, Trust

    assert _enum("verdictKind") == [k.value for k in VerdictKind]
    assert _enum("confidence") == [c.value for c in Confidence]
    assert _enum("collisionKind") == [k.value for k in CollisionKind]
    assert sorted(_enum("trust")) == sorted(t.value for t in Trust)
    blame_trust = SCHEMA["$defs"]["blame"]["properties"]["trust"]["anyOf"]  # a frame's trust, or a Python frame's
    assert blame_trust == [{"$ref": "#/$defs/trust"}] + [{"const": t.value} for t in PythonTrust]
    assert _enum("support") == [s.value for s in Support]
    # a process without CPython has `python: null`, never the reader's no_python status
    assert _enum("pythonStatus") == [s.value for s in Status if s is not Status.NO_PYTHON]
    assert _enum("protocol") == [p[0] for p in PROTOCOLS]
    roles = [SYSTEM, C_RUNTIME, PYTHON_RUNTIME, RUNTIME_CODE, SCANNED, OUTSIDE_MODULES, ABOVE_RECURSION, WAY_OUT]
    roles += [DELAY_LOAD_HELPER]
    assert _enum("blameRole") == roles
    assert _enum("endingRoute") == [r.value for r in EndingRoute]
    assert _enum("reasonKind") == [k.value for k in ReasonKind]
    assert _enum("triageStatus") == [ANALYSED, FAILED, TIMED_OUT]
    defs = SCHEMA["$defs"]
    for model, name in SCHEMA_NAMES.items():
        kind = name[len("dumpkit-") :]
        assert defs[kind]["properties"]["schema"] == {"const": name}, model
        assert defs[kind]["properties"]["schema_version"] == {"const": SCHEMA_VERSION}, model
    assert defs["triage"]["properties"]["schema"] == {"const": triage_view.SCHEMA}
    assert defs["triage"]["properties"]["schema_version"] == {"const": triage_view.SCHEMA_VERSION}
    assert sorted(SCHEMA_NAMES.values()) == sorted(f"dumpkit-{k}" for k in KINDS if k != "triage")


def test_the_schema_is_draft_2020_12_and_every_object_is_closed():
    validator().check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["oneOf"] == [{"$ref": f"#/$defs/{k}"} for k in KINDS]
    for name, definition in SCHEMA["$defs"].items():
        if definition.get("type") == "object" and "properties" in definition:
            assert definition.get("additionalProperties") is False, name
            assert set(definition["required"]) <= set(definition["properties"]), name
