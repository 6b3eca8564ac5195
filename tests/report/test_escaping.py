"""Each renderer escapes every dump string the view hands it: names aimed at terminals,
Markdown, HTML and DML in every place a report shows one (frames, thread names, recursion
and entry path, frame sizes, module paths, raiser), built from plain model objects."""

from __future__ import annotations

import dataclasses
import re

import pytest

from dumpkit.analysis.model import (
    BlameFrame,
    CollidingModule,
    CollisionKind,
    Confidence,
    CrashSignature,
    CudaComponent,
    Disassembly,
    Environment,
    FrameSize,
    Instruction,
    PassedFrame,
    ProcessRecord,
    RuntimeCollision,
)
from dumpkit.report.dml import render_dml
from dumpkit.report.escape import clean
from dumpkit.report.html import render_html
from dumpkit.report.markdown import render_markdown
from dumpkit.report.text import render_text
from dumpkit.unwind.frames import Trust
from tests.hostile.corpus import HOSTILE_NAMES
from tests.support.builders import crash, cycle, frames, report, system, thread

DML_NAME = '"><link cmd=".kill">x</link><b>'
NAMES = HOSTILE_NAMES + (DML_NAME,)


def _hostile_report(name: str):
    stack = tuple(dataclasses.replace(f, symbol=f"{name}!f{f.index}") for f in frames(30))
    cyc = cycle([f"{name}!f0", f"{name}!f1"], first=0, repetitions=10, entry=[f"{name}!main"] * 8)
    env = Environment(
        tensorflow=(name,),
        tensorflow_version="2.10.0",
        cuda=(CudaComponent("cuDNN", name, "8.1"),),
        runtime_collisions=(  # dump strings in every part of a collision
            RuntimeCollision(
                CollisionKind.OPENMP,
                Confidence.HIGH,
                f"Two copies: {name}",
                (CollidingModule(name, name, name, name, name),),
                name,
                (name,),
                (name,),
            ),
        ),
    )
    code = Disassembly(
        (Instruction(0x1000, "e8", f"call 0x2000 {name}", target_name=name), Instruction(0x1005, "00", name, True)),
        "guessed",
        note=name,
    )
    built = report(
        [
            thread(1, stack, crashing=True, cycles=[cyc], name=name),
            thread(2, stack[:3], name=name, same=(3,)),
            thread(3, stack[:3], name=name, same=(2,)),
        ],
        frame_sizes=[FrameSize(5, f"{name}!big", 1 << 20, prologue_text=name, oversized=True)],
        crash_info=crash(raised_by=name, module=name, module_version=name, disassembly=code, registers=(("rip", 1),)),
        system_summary=system(wine=name),
        environment=env,
        soft_errors=(f"module {name}: bad",),
    )
    return dataclasses.replace(
        built,
        process=ProcessRecord(name, name, name, command_line=name),
        signature=CrashSignature(f"X | {name}", "X", (name,), 1),
        blame=BlameFrame(1, name, name, Trust.SCAN, False, (PassedFrame(0, name, "system"),)),
    )


@pytest.mark.parametrize("name", NAMES)
def test_text_has_no_control_sequences(name):
    out = render_text(_hostile_report(name), color=True)
    stripped = re.sub(r"\x1b\[[0-9;]*m", "", out)  # rich's own colours
    assert "\x1b" not in stripped and "\x07" not in out and "\x08" not in out and "\u202e" not in out
    assert "\r" not in out
    assert f"{clean(name)}!f1" in stripped  # shown, defused


def _md_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


@pytest.mark.parametrize("name", NAMES)
def test_markdown_makes_no_markup_and_keeps_its_tables_and_fences(name):
    md = render_markdown(_hostile_report(name))
    html = _md_html(md).lower()
    assert "<script" not in html and "href=" not in html and "<img" not in html and "<b>x</b>" not in html
    assert "<link" not in html
    fences = [ln for ln in md.splitlines() if ln.lstrip().startswith("```")]
    assert all(ln.strip() == "```" for ln in fences) and len(fences) % 2 == 0
    # registers, other threads and problems folded; the 30-row crashing stack is shown open
    assert html.count("<details>") == html.count("</details>") == 3
    for line in md.splitlines():
        if line.startswith("| "):  # facts (2 cells) and frame sizes (4, the mark beside the size)
            assert line.replace("\\|", "").count("|") in (3, 5), line


@pytest.mark.parametrize("name", NAMES)
def test_html_escapes_every_name(name):
    page = render_html(_hostile_report(name))
    low = page.lower()
    assert "<script" not in low and "href=" not in low and "<link" not in low and "<b>x" not in low
    assert "\x1b" not in page and "\x07" not in page
    if "<" in name:
        assert "&lt;" in page


@pytest.mark.parametrize("name", NAMES)
def test_dml_tags_and_link_commands_are_only_dumpkits(name):
    lines = render_dml(_hostile_report(name), all_threads=True)
    out = "\n".join(lines)
    assert not re.search(r"<(?!/?(b|link)[ >])", out)  # every '<' starts one of our tags
    for cmd in re.findall(r'<link cmd="([^"]*)">', out):
        # thread and frame switches, `u` at a faulting-code address, `.ecxr`: nothing else
        thread = r"~~\[0x[0-9a-f]+\]s(; \.ecxr)?(; \.frame 0x[0-9a-f]+)?"
        assert re.fullmatch(rf"{thread}|u 0x[0-9a-f]+|\.ecxr", cmd), cmd
    assert "\x1b" not in out and "\x07" not in out


@pytest.mark.parametrize("name", NAMES)
def test_dump_strings_never_travel_as_dumpkits_own_words(name):
    """WORDS spans are written as they are by every format: they must hold dumpkit's
    wording only, never a value from the dump."""
    from dumpkit.report.view import WORDS, report_view

    view = report_view(_hostile_report(name))
    lines = [f.value for f in view.facts.rows] + [f.terminal_value for f in view.facts.rows if f.terminal_value]
    lines += [g.summary for g in view.threads.groups]
    lines += [view.blame] if view.blame else []
    lines += [m for c in view.facts.collisions for m in c.modules]
    spans = [s for line in lines for s in line]
    assert any(name in s.text for s in spans)  # the name is there...
    assert not any(name in s.text or "evil" in s.text for s in spans if s.kind == WORDS)  # ...never as WORDS
