"""The fast front door (dumpkit/frontdoor.py): `explain`, `analyze` and `triage` start
without typer, pydantic or (for explain) any of the dump machinery, and answer exactly as
typer's declarations in cli.py do. Timings are bench/'s business; these check what is
imported and what is printed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dumpkit.frontdoor import (
    ANALYZE_OPTIONS,
    DECIMAL,
    EXPLAIN_OPTIONS,
    INFO_OPTIONS,
    MANY,
    NUMBER,
    OFF,
    ON,
    STACK_OPTIONS,
    TEXT,
    TRIAGE_OPTIONS,
    parse,
)
from tests.support.samples import ROOT, SAMPLE_BIN, sample_path

TYPER_PATH = "import sys; from dumpkit.cli import main; sys.argv[0] = 'dumpkit'; main()"


def _imported(*args):
    """(modules imported, completed process) of `python -X importtime -m dumpkit ARGS`."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dumpkit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    names = set()
    out = []
    for line in r.stderr.splitlines():
        if line.startswith("import time:"):
            names.add(line.rsplit("|", 1)[1].strip())
        else:
            out.append(line)
    r.stderr = "\n".join(out)
    return names, r


def _heavy(names, roots):
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in roots))


SHARED = {"dumpkit.commands", "dumpkit.commands.exits", "dumpkit.commands.inputs", "dumpkit.commands.output"}


def _other_commands(names, command):
    """Command modules imported besides `command`'s own and the helpers they share."""
    return sorted(set(_heavy(names, ("dumpkit.commands",))) - SHARED - {f"dumpkit.commands.{command}"})


def test_explain_imports_no_parser_framework_and_no_dump_machinery():
    names, r = _imported("explain", "0xC00000FD")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0xC00000FD  STATUS_STACK_OVERFLOW\n")
    assert "dumpkit.analysis.codes" in names  # the check sees dumpkit's own imports
    heavy = ("typer", "click", "pydantic", "rich", "capstone", "minidump")
    heavy += ("dumpkit.engine", "dumpkit.unwind", "dumpkit.sources", "dumpkit.analysis.model", "dumpkit.cli")
    assert _heavy(names, heavy) == []
    assert _other_commands(names, "explain") == []


# The standard library's dataclasses imports inspect, ast, dis and tokenize: an eighth of a small
# dump's `analyze` (dumpkit/records.py makes records without it).
NOT_AT_START = ("dataclasses", "inspect")


def test_analyze_imports_neither_typer_nor_pydantic_nor_capstones_package():
    names, r = _imported("analyze", sample_path("null_deref.dmp"), "-i", SAMPLE_BIN, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"]["headline"]
    assert "dumpkit.engine" in names
    assert "dumpkit.unwind.decoder" in names  # code is decoded, with capstone's library alone
    assert _heavy(names, ("typer", "click", "pydantic", "dumpkit.cli", "capstone", *NOT_AT_START)) == []
    # a recursion's analyses are imported for a stack with a cycle only
    assert _heavy(names, ("dumpkit.analysis.python", "dumpkit.analysis.callsites")) == []
    assert _other_commands(names, "analyze") == []
    names, r = _imported("analyze", sample_path("null_deref.dmp"), "-i", SAMPLE_BIN)  # as text
    assert r.returncode == 0 and "NULL" in r.stdout, r.stderr
    # textwrap compiles its hyphenation patterns at import: the text report wraps, and quotes
    # the dump's path, without it and shlex
    assert _heavy(names, (*NOT_AT_START, "textwrap", "shlex")) == []


def test_the_table_is_typers_declarations():
    """Every option typer knows for explain, analyze, triage, stack and info is in the table,
    with the same keyword and the same kind of value, and nothing else is."""
    import typer.main

    from dumpkit.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    tables = (
        ("analyze", ANALYZE_OPTIONS),
        ("explain", EXPLAIN_OPTIONS),
        ("triage", TRIAGE_OPTIONS),
        ("stack", STACK_OPTIONS),
        ("info", INFO_OPTIONS),
    )
    for command, table in tables:
        declared = {}
        for p in commands[command].params:
            if p.param_type_name != "option":
                continue
            if p.is_flag:
                declared.update(dict.fromkeys(p.opts, (p.name, ON)))
                declared.update(dict.fromkeys(p.secondary_opts, (p.name, OFF)))
            else:
                # typer 0.29 keeps the annotation; older typers a click type ("integer"), or
                # their vendored click's ("int", 0.26-0.28)
                desc = getattr(p, "type_descriptor", None)
                number = desc.annotation is int if desc is not None else p.type.name in ("integer", "int")
                decimal = desc.annotation is float if desc is not None else p.type.name == "float"
                kind = MANY if p.multiple else NUMBER if number else DECIMAL if decimal else TEXT
                declared.update(dict.fromkeys(p.opts, (p.name, kind)))
        declared.pop("--help", None)
        assert table == declared, command


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["--width", "abc"],
        ["--width", "-5"],
        ["--width"],
        ["-iDIR"],
        ["--format"],
        ["--colour"],
        ["--color=yes"],
        ["--", "x.dmp"],
    ],
)
def test_anything_but_the_plain_spellings_is_left_to_typer(args):
    assert parse(args, ANALYZE_OPTIONS) is None


def test_plain_spellings_parse_as_typer_would():
    args = ["x.dmp", "-i", "a", "--image-path=b", "-f", "JSON", "--format", "md", "--max-frames", "7"]
    args += ["--no-color", "--color", "-o", "-"]
    assert parse(args, ANALYZE_OPTIONS) == (
        ["x.dmp"],
        {"image_path": ["a", "b"], "fmt_name": "md", "max_frames": 7, "color": True, "output": "-"},
    )
    assert parse(["-1073741571", "--how-to-capture"], EXPLAIN_OPTIONS, negative_numbers=True) == (
        ["-1073741571"],
        {"how_to_capture": True},
    )


def _both(*args):
    fast = subprocess.run(
        [sys.executable, "-m", "dumpkit", *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    typer = subprocess.run(
        [sys.executable, "-c", TYPER_PATH, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    return fast, typer


# two in the fast tier (a child process pair each), the rest in the full run
EXPLAIN_CASES = [["0xC00000FD"], ["-1073741571"]] + [
    pytest.param(args, marks=pytest.mark.slow)
    for args in (["stack", "overflow", "--how-to-capture"], ["--how-to-capture"], [], ["xyzzy"], ["0xC0000409/7"])
]


@pytest.mark.parametrize(
    "args", EXPLAIN_CASES, ids=["code", "negative", "words", "capture", "nothing", "unknown", "subcode"]
)
def test_explain_answers_as_typer_does(args):
    fast, typer = _both("explain", *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.stdout or fast.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["-i", SAMPLE_BIN, "-f", "json"],
        [f"--image-path={SAMPLE_BIN}", "--format", "MD", "--no-redact", "--threshold", "4096"],
        ["--image-path", SAMPLE_BIN, "--width", "60", "--no-color", "--max-frames", "3"],
        ["--no-recorded-paths", "-f", "html", "--redact"],
        ["-f", "xml"],
    ],
    ids=["json", "markdown", "text", "html", "bad-format"],
)
def test_analyze_answers_as_typer_does(args):
    fast, typer = _both("analyze", sample_path("null_deref.dmp"), *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.stdout or fast.stderr


def test_stack_and_info_import_neither_typer_nor_pydantic():
    """typer and the pydantic typer 0.29 imports were 0.23 s of `info --json`'s 0.31 s here."""
    names, r = _imported("stack", sample_path("null_deref.dmp"), "-i", SAMPLE_BIN, "--json")
    assert r.returncode == 0, r.stderr
    assert '"frames"' in r.stdout and "dumpkit.engine" in names
    assert _heavy(names, ("typer", "click", "pydantic", "dumpkit.cli", *NOT_AT_START)) == []
    names, r = _imported("info", sample_path("null_deref.dmp"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "dumpkit-info"
    assert _heavy(names, ("typer", "click", "pydantic", "dumpkit.cli")) == []


STACK_CASES = [["-i", SAMPLE_BIN]] + [
    pytest.param(args, marks=pytest.mark.slow)
    for args in (
        ["--all", "--json", f"--image-path={SAMPLE_BIN}", "--no-recorded-paths"],
        ["-t", "1", "--max-frames", "3", "--full"],
        ["--thread", "-3"],  # not a thread id: typer's error
        ["--python", "--all"],
    )
]


@pytest.mark.parametrize("args", STACK_CASES, ids=["plain", "all-json", "thread", "bad-thread", "python"])
def test_stack_answers_as_typer_does(args):
    fast, typer = _both("stack", sample_path("null_deref.dmp"), *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.stdout or fast.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--json"], [], ["--no-fetch-images", "--json"]], ids=["json", "text", "no-fetch"])
def test_info_answers_as_typer_does(args):
    fast, typer = _both("info", sample_path("null_deref.dmp"), *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.stdout


def test_a_missing_dump_is_one_line_either_way():
    fast, typer = _both("analyze", ROOT / "no-such.dmp")
    assert (
        (fast.returncode, fast.stderr)
        == (typer.returncode, typer.stderr)
        == (2, f"dumpkit: error: {ROOT / 'no-such.dmp'}: no such file\n")
    )


def test_triage_imports_neither_typer_nor_pydantic(tmp_path):
    """A fleet's triage pays start-up once per run: typer and pydantic were ~95 ms of it."""
    (tmp_path / "a.dmp").write_bytes(sample_path("null_deref.dmp").read_bytes())
    names, r = _imported("triage", tmp_path, "-i", SAMPLE_BIN, "-j", "1", "--format", "json", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert [d["status"] for d in json.loads(r.stdout)["dumps"]] == ["analysed"]
    assert _heavy(names, ("typer", "click", "pydantic", "dumpkit.cli")) == []
    assert _other_commands(names, "triage") == []


def _without_timings(doc):
    """A triage document without what differs between two runs of it: each dump's seconds."""
    for d in doc.get("dumps", ()):
        d.pop("seconds", None)
    return doc


@pytest.mark.parametrize(
    "args",
    [
        ["-i", SAMPLE_BIN, "-f", "json", "-j", "2", "--timeout", "120", "--no-progress"],
        pytest.param(
            ["--format=json", "--jobs=1", "--timeout=0.5", "--no-fetch-images", "--memory-cap", "0"],
            marks=pytest.mark.slow,
        ),
        pytest.param(["-f", "json", "--memory-cap", "lots"], marks=pytest.mark.slow),
        pytest.param(["-f", "json", "--timeout", "1e3"], marks=pytest.mark.slow),
        pytest.param(["-f", "yaml"], marks=pytest.mark.slow),
    ],
    ids=["json", "equals-spellings", "bad-cap", "typer-float", "bad-format"],
)
def test_triage_answers_as_typer_does(args, tmp_path):
    for name in ("null_deref.dmp", "fastfail_gs.dmp"):
        (tmp_path / name).write_bytes(sample_path(name).read_bytes())
    (tmp_path / "broken.dmp").write_bytes(b"MDMP" + b"\0" * 10)
    fast, typer = _both("triage", tmp_path, *args)
    assert (fast.returncode, fast.stderr) == (typer.returncode, typer.stderr)
    if fast.stdout.startswith("{"):
        assert _without_timings(json.loads(fast.stdout)) == _without_timings(json.loads(typer.stdout))
    else:
        assert fast.stdout == typer.stdout
    assert fast.stdout or fast.stderr


def test_a_folder_without_dumps_is_one_line_either_way(tmp_path):
    fast, typer = _both("triage", tmp_path)
    assert (fast.returncode, fast.stderr) == (typer.returncode, typer.stderr)
    assert fast.returncode == 2 and fast.stderr.startswith("dumpkit: error: no dump files found")
