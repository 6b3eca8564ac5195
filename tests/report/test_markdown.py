"""Markdown for a GitHub issue, from plain model objects."""

from __future__ import annotations

import functools
import html as html_lib
import re

import pytest

from dumpkit.analysis.model import FrameRecord
from dumpkit.report.markdown import MAX_CHARACTERS, render_markdown
from tests.support.builders import crash, cycle, frames, report, thread


def test_other_threads_summary_counts_threads_and_distinct_stacks():
    same = frames(2)
    threads = [thread(1, frames(1), crashing=True), thread(2, same, same=(3,)), thread(3, same, same=(2,))]
    assert "<summary>Other threads (2; 1 distinct stack)</summary>" in render_markdown(report(threads))
    threads.append(thread(4, frames(3)))
    assert "<summary>Other threads (3; 2 distinct stacks)</summary>" in render_markdown(report(threads))


def _github_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


def _text_outside_code(page: str) -> str:
    """What GitHub scans for mentions and references: text, not code or preformatted blocks."""
    page = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", " ", page, flags=re.S)
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", page))


# GitHub's patterns (html-pipeline's MentionFilter and issue references), simplified.
MENTION = re.compile(r"(?:^|\W)@[a-z0-9][a-z0-9-]*", re.I)
ISSUE = re.compile(r"(?:^|\W)(?:[\w.-]+/[\w.-]+)?#\d+\b|\bGH-\d+\b", re.I)


def _frame(i: int, name: str) -> FrameRecord:
    return FrameRecord(
        i, 0x7FF6_0000_1000 + i, 0x1000_0000 + 0x40 * i, "m.dll", 0x1000 + i, None, name, 0x40, "unwind_info"
    )


def test_dump_names_cannot_mention_or_link_on_github():
    names = ["@octocat", "#123", "fix #42 now", "org/repo#7", "GH-99", "a @team-x b"]
    stack = [_frame(i, f"{names[i % len(names)]}!f{i}") for i in range(8)]
    threads = [thread(1, stack, crashing=True, name="@octocat"), thread(2, stack[:3], name="#1")]
    r = report(threads, crash_info=crash(raised_by="@octocat!abort"), soft_errors=("module @octocat #12: bad",))
    md = render_markdown(r)
    text = _text_outside_code(_github_html(md))
    assert "octocat" in text and "12" in text  # still shown...
    assert not MENTION.search(text), MENTION.search(text)  # ...but never a mention
    assert not ISSUE.search(text), ISSUE.search(text)


def test_no_table_has_an_empty_header_or_row():
    r = report([thread(1, frames(3), crashing=True)])
    page = _github_html(render_markdown(r))
    assert "<table>" in page
    assert not re.search(r"<th[^>]*>\s*</th>", page)
    for row in re.findall(r"<tr>(.*?)</tr>", page, re.S):
        assert re.sub(r"<[^>]+>|\s", "", row), row


def test_a_short_crashing_stack_is_open_and_a_long_one_folded():
    short = render_markdown(report([thread(1, frames(5), crashing=True)]))
    assert "**Crashing thread 1: 5 frames**" in short and "<summary>Crashing thread" not in short
    long = render_markdown(report([thread(1, frames(120), crashing=True)]))
    assert "<summary>Crashing thread 1: 120 frames</summary>" in long


@functools.lru_cache(maxsize=1)
def _huge_report():
    name = "tensorflow::core::very_long_namespace::" + "Kernel" * 30
    threads = [thread(1, [_frame(i, f"{name}!crash{i}") for i in range(200)], crashing=True)]
    for tid in range(2, 600):  # every thread a stack of its own: nothing folds together
        threads.append(thread(tid, [_frame(i, f"{name}!t{tid}_{i}") for i in range(200)], name=f"worker {tid}"))
    return report(threads, soft_errors=tuple(f"problem {i}: " + "x" * 400 for i in range(200)))


def test_any_dump_fits_a_github_issue_and_says_what_was_trimmed():
    md = render_markdown(_huge_report())
    assert len(md) < MAX_CHARACTERS
    assert "trimmed to keep this report under 60,000 characters" in md
    assert "Stack overflow: `m.dll!f0` recursed" in md  # the verdict is never what goes
    assert "!crash0" in md and "more frames" in md  # the crashing stack's top stays, its cut is marked
    page = _github_html(md)
    assert page.count("<details>") == page.count("</details>")
    assert md.count("```") % 2 == 0


@pytest.mark.parametrize("limit", [20_000, 5_000])
def test_a_smaller_limit_is_kept_too(limit):
    md = render_markdown(_huge_report(), limit=limit)
    assert len(md) < limit and md.count("```") % 2 == 0


def test_recursion_rows_fold_and_the_report_stays_small_for_a_deep_cycle():
    stack = [_frame(i, "m.dll!a" if i % 2 == 0 else "m.dll!b") for i in range(200)]
    t = thread(1, stack, crashing=True, cycles=[cycle(["m.dll!a", "m.dll!b"], 0, 100)], frame_count=1_000_000)
    md = render_markdown(report([t]))
    assert "the cycle above repeats" in md and len(md) < 10_000


def test_a_crashing_thread_without_frames_still_renders():
    """A dump whose crashing thread has no walkable frame (the fuzz campaign made one):
    the stack block is empty, not a TypeError."""
    md = render_markdown(report([thread(1, (), crashing=True)], crash_info=crash()))
    assert "Frame size (B)" in md
