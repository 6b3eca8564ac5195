"""The model's words are str-valued enums (words.Word): each member is its old string in
JSON, in text and in comparisons, so making them enums changed no output."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest

from dumpkit.analysis.model import CallKind, Confidence, NotWalked, PythonTrust, Severity, VerdictKind
from dumpkit.unwind.frames import StopReason, Trust
from dumpkit.report.json_report import render_json
from dumpkit.words import Word
from tests.support.builders import frames, report, thread

WORDS = [VerdictKind, Confidence, Severity, CallKind, Trust, StopReason, NotWalked, PythonTrust]


@pytest.mark.parametrize("enum", WORDS, ids=lambda e: e.__name__)
def test_a_word_is_its_value_everywhere(enum):
    assert issubclass(enum, Word)
    for member in enum:
        value = member.value
        assert member == value and hash(member) == hash(value)
        assert str(member) == value and f"{member}" == value and f"{member:>40}" == f"{value:>40}"
        assert json.dumps({member: member}) == json.dumps({value: value})
        assert pickle.loads(pickle.dumps(member)) is member
        assert enum(value) is member


def test_stack_verdicts_are_one_list():
    stack = {k for k in VerdictKind if k.is_stack}
    assert stack == {VerdictKind.RECURSION, VerdictKind.OVERSIZED_FRAME, VerdictKind.STACK_OVERFLOW}


def test_the_frame_limit_says_its_value():
    assert StopReason.FRAME_LIMIT.text(2_000_000) == "frame limit (2000000) reached"
    assert StopReason.FRAME_LIMIT.text() == str(StopReason.FRAME_LIMIT) == "frame limit reached"


def test_a_thread_says_how_its_walk_ended_or_why_there_was_none():
    """ThreadReport carries the walk's end as data; `stop_reason` is the words JSON and
    every report show."""
    cut = dataclasses.replace(thread(1, frames(3)), stop=StopReason.FRAME_LIMIT, frame_limit=2_000_000)
    assert cut.stop_reason == "frame limit (2000000) reached"
    shown = json.loads(render_json(report(threads=[cut])))["threads"][0]
    assert shown["stop_reason"] == cut.stop_reason and "stop" not in shown and "frame_limit" not in shown
    assert list(shown)[5:8] == ["elided_frames", "stop_reason", "trust_counts"]  # where it always was
    skipped = dataclasses.replace(cut, stop=NotWalked.SKIPPED, frame_limit=None)
    assert skipped.stop_reason == "not walked"
    repeated = dataclasses.replace(skipped, stop=NotWalked.REPEATED_TID)
    assert repeated.stop_reason == "not walked (repeats an earlier thread id)"
