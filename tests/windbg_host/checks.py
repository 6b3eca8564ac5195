"""What the debugger-host lane checks of a session, on either route (tfstack.dll hosting
a Python, or pykd.pyd's `!py`): the debugger still answers, `!tfstack --json` tells what
`dumpkit analyze` tells, and every DML link does what its text says."""

from __future__ import annotations

import html
import json
import re
from typing import List

from tests.support import wine as lane
from tests.support.samples import SAMPLE_BIN
from tests.support.wine import story
from tests.windbg_host.host import Command, Session

SPACED = "Z:\\no such folder\\images dir"  # quoted, with spaces: must arrive as one word


def alive(n: int) -> str:
    """A command the debugger answers with a known line: typed after each run."""
    return f"? 0n{n}"


def assert_alive(session: Session, n: int) -> None:
    got = session.by_command(alive(n))
    assert got and got[0].finished, (
        f"the debugger did not come back for `? 0n{n}`: {session.crash or session.stderr[-1500:]}"
    )
    assert f"Evaluate expression: {n} = " in got[0].text, got[0].text


def death(name: str, session: Session) -> str:
    last = session.commands[-1] if session.commands else None
    return (
        f"the debugger died on {name} (exit {session.returncode}, {session.crash or 'no exception record'}) "
        f"in {last.command if last else 'start-up'!r}: {(last.output + last.errors)[-1500:] if last else ''}\n"
        f"{session.stderr[-3000:]}"
    )


def one(session: Session, command: str) -> Command:
    got = session.by_command(command)
    assert got, f"{command!r} was not run"
    return got[0]


def text_of(dml: str) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", dml))


def assert_same_story(cli: dict, windbg: dict, name: str) -> None:
    """`!tfstack --json` against `dumpkit analyze --format json` on the same dump: the
    same verdict, crash, findings, frame sizes, Python stacks, modules, and every thread's
    walk (a thread parked outside its stack by the dump writer: its first frame only,
    see test_real_pykd)."""
    full = "_full" in name or ".trimmed." in name
    c, w = story.story_of(cli, full), story.story_of(windbg, full)
    for key in ("verdict", "crash", "findings", "frame_sizes", "python", "modules"):
        assert w[key] == c[key], key
    parked = story.parked_threads(cli)
    assert [t["tid"] for t in w["threads"]] == [t["tid"] for t in c["threads"]]
    for wt, ct in zip(w["threads"], c["threads"]):
        if ct["tid"] in parked:
            assert wt["frames"][0][:4] == ct["frames"][0][:4], f"thread {ct['tid']}"
            continue
        assert wt == ct, f"thread {ct['tid']}"


_CURRENT_THREAD = re.compile(r"^\.\s+\d+\s+Id: [0-9a-f]+\.([0-9a-f]+) ", re.M)


def assert_links(session: Session, json_command: str, links_command: str) -> None:
    """Each link `links_command` printed, clicked by the host's `#links ~.` (so each is
    followed by `~.`): the engine takes it; a thread link selects that thread; a frame link
    selects that thread and the frame with dumpkit's Child-SP for the frame number it
    shows (per `json_command`'s report); a code link disassembles from its address."""
    commands = session.commands
    shown = one(session, links_command)
    assert "<link cmd=" in shown.dml
    doc = json.loads(one(session, json_command).text)
    frames = {t["tid"]: {f["index"]: f for f in t["frames"]} for t in doc["threads"]}
    links = [(i, c) for i, c in enumerate(commands) if c.link is not None]
    assert links, "no link was run"
    checked_frames = checked_threads = 0
    for i, link in links:
        assert link.finished and link.hresult == 0, (link.command, link.hresult, link.errors)
        after = commands[i + 1]
        assert after.command == "~."
        frame = story.FRAME_LINK.match(link.command)
        thread = story.THREAD_LINK.match(link.command)
        if frame or thread:
            tid = int((frame or thread).group(1), 16)
            current = _CURRENT_THREAD.search(after.text)
            assert current and int(current.group(1), 16) == tid, (link.command, after.text)
            checked_threads += 1
        if frame:
            index = int(frame.group(2), 16)
            line = story.frame_line(link.text, index)
            assert line is not None, f"{link.command!r} did not select frame {index:#x}: {link.text!r}"
            ours = frames[tid].get(int(link.link, 16))
            if ours is not None:
                assert int(line.split()[1].replace("`", ""), 16) == int(ours["sp"], 16), (link.command, line)
                checked_frames += 1
        elif not thread:
            code = story.CODE_LINK.match(link.command)
            if code:
                address = int(code.group(1), 16)
                assert f"{address >> 32:08x}`{address & 0xFFFFFFFF:08x}" in link.text, (link.command, link.text)
            else:
                assert link.command == ".ecxr" and story.REGISTERS.search(link.text), (link.command, link.text)
    assert checked_threads and checked_frames


def without_progress(lines: str) -> List[str]:
    """A run's output lines but the progress lines (their seconds and MiB vary)."""
    return [line for line in lines.splitlines() if not line.startswith("tfstack: working,")]


def option_runs() -> List[str]:
    """What is typed after `!tfstack` to try every option on recursion_cycle3.dmp: each
    documented option, a bad one, --help and -h, a missing value, a bad value, a thread
    that does not exist."""
    W = lane.windows_path
    return [
        f'--json --image-path "{SPACED}"',
        "",
        "--all",
        "--json",
        "--thread 0x188",
        "-t 392 --rows 3",
        "--max-frames 100 --json",
        "--plain",
        f"-i {W(SAMPLE_BIN)} --symbol-path {W(SAMPLE_BIN / 'pdb')} --json",
        "--thread 0x188 --json",
        "--bogus",
        "--help",
        "-h",
        "--thread",
        "--rows 0",
        "--thread 0x999",
    ]


def assert_options(session: Session, runs: List[str]) -> None:
    """Each of option_runs() was typed as `!tfstack ARGS` followed by `alive(i)`: every one
    did what it says, and the debugger answered after each."""
    for i in range(len(runs)):
        assert_alive(session, i)
    out = {args: one(session, f"!tfstack {args}".rstrip()) for args in runs}

    def doc(args: str) -> dict:
        text = out[args].text
        assert text.lstrip().startswith("{"), (text + out[args].errors)[:1000]
        return json.loads(text)

    problems = doc(runs[0])["images"]["search_problems"]
    assert f"--image-path {SPACED}: no such folder" in problems, problems
    assert "VERDICT" in out[""].dml and "<link cmd=" in out[""].dml

    def heading(tid: int) -> str:
        return f'<b>Thread</b> <link cmd="~~[{tid:#x}]s">'

    assert heading(0x184) in out["--all"].dml and heading(0x188) in out["--all"].dml
    assert heading(0x188) in out["--thread 0x188"].dml and heading(0x184) not in out["--thread 0x188"].dml
    assert heading(0x184) not in out[""].dml
    assert doc("--json")["verdict"]["kind"] == "recursion"
    rows3 = out["-t 392 --rows 3"].dml
    assert heading(0x188) in rows3 and len(rows3) < len(out["--thread 0x188"].dml)
    crashing = [t for t in doc("--max-frames 100 --json")["threads"] if t["is_crashing"]][0]
    assert crashing["frame_count"] == 100
    assert not out["--plain"].dml and "VERDICT" in out["--plain"].text
    assert doc(runs[8])["verdict"] == doc("--json")["verdict"]
    assert any(t["tid"] == 0x188 for t in doc("--thread 0x188 --json")["threads"])
    assert "tfstack: error: unrecognized arguments: --bogus" in out["--bogus"].text
    assert "usage: !tfstack" in out["--help"].text and "--image-path DIR" in out["--help"].text
    assert "usage: !tfstack" in out["-h"].text
    assert "expected one argument" in out["--thread"].text
    assert "must be at least 1" in out["--rows 0"].text
    assert "no thread 2457 (0x999)" in out["--thread 0x999"].text
    for args in ("--bogus", "--thread", "--rows 0", "--thread 0x999"):
        assert "Traceback" not in out[args].output + out[args].errors
