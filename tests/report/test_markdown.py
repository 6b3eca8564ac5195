"""Markdown for a GitHub issue, from plain model objects."""

from __future__ import annotations

from dumpkit.report.markdown import render_markdown
from tests.report.builders import frames, report, thread


def test_other_threads_summary_counts_threads_and_distinct_stacks():
    same = frames(2)
    threads = [thread(1, frames(1), crashing=True), thread(2, same, same=(3,)), thread(3, same, same=(2,))]
    assert "<summary>Other threads (2; 1 distinct stack)</summary>" in render_markdown(report(threads))
    threads.append(thread(4, frames(3)))
    assert "<summary>Other threads (3; 2 distinct stacks)</summary>" in render_markdown(report(threads))
