"""The model's words are str-valued enums (words.Word): each member is its old string in
JSON, in text and in comparisons, so making them enums changed no output."""

from __future__ import annotations

import json
import pickle

import pytest

from dumpkit.analysis.model import CallKind, Confidence, Severity, VerdictKind
from dumpkit.unwind.frames import StopReason, Trust
from dumpkit.words import Word

WORDS = [VerdictKind, Confidence, Severity, CallKind, Trust, StopReason]


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
