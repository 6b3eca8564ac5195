"""Next steps as data: every step has an id of its own and a template of named fields, the
verdict fits steps to the process by id, and nothing read from the dump is taken for a
template or for the advice a rule looks for."""

from __future__ import annotations

import string
from dataclasses import replace
from types import ModuleType
from typing import Dict, List

from dumpkit.analysis.advice import Step, texts
from dumpkit.analysis.codes import STATUS_CODES, notes, steps_given_a_dump
from dumpkit.analysis.model import CrashInfo, Environment
from dumpkit.analysis.verdict import Case, decide
from dumpkit.analysis.verdict import (
    access_violation,
    cxx_exception,
    delay_load,
    fail_fast,
    heap_corruption,
    illegal_instruction,
    other,
    stack_overflow,
)
import dumpkit.analysis.verdict as verdict
from dumpkit.unwind.frames import Frame

_MODULES: List[ModuleType] = [
    notes,
    verdict,
    access_violation,
    cxx_exception,
    delay_load,
    fail_fast,
    heap_corruption,
    illegal_instruction,
    other,
    stack_overflow,
]


def _every_step() -> List[Step]:
    named = [v for m in _MODULES for v in vars(m).values() if isinstance(v, Step)]
    table = [s for info in STATUS_CODES.values() for s in info.steps]
    return list({id(s): s for s in named + table}.values())


def test_every_step_has_an_id_of_its_own():
    by_id: Dict[str, Step] = {}
    for step in _every_step():
        assert by_id.setdefault(step.id, step) == step, f"two steps are called {step.id}"
    assert len(by_id) > 60


def test_templates_have_only_named_fields():
    for step in _every_step():
        for _, field, spec, conversion in string.Formatter().parse(step.template):
            if field is not None:
                assert field.isidentifier() and not spec and not conversion, (step.id, field)


def test_the_steps_left_out_of_a_verdict_are_chosen_by_id():
    # a table step that sends the reader to `dumpkit analyze` is one the verdict (that
    # analysis) leaves out: its id must be in BEFORE_A_DUMP, whatever its words say
    for info in STATUS_CODES.values():
        kept = steps_given_a_dump(info.steps)
        for step in info.steps:
            assert (step in kept) == ("dumpkit analyze" not in step.text), (info.name, step.id)


def test_a_value_is_never_read_as_a_template():
    step = Step("t.x", "Look at {function} first.").given(function="app.dll!`anonymous namespace'::{lambda}::f")
    assert step.text == "Look at app.dll!`anonymous namespace'::{lambda}::f first."


def test_a_later_value_wins_and_text_is_written_once():
    page_heap = notes.PAGE_HEAP
    assert "gflags /p /enable python.exe /full" in page_heap.text
    assert "gflags /p /enable tfhost.exe /full" in page_heap.given(exe="tfhost.exe").text
    assert texts((page_heap, page_heap.given(exe="python.exe"))) == (page_heap.text,)


def _abort(raised_by: str) -> Case:
    frames = [
        Frame(0, 0x7FF000001000, 0x1000, "ucrtbase.dll", 0x1000, 0x1000, "ucrtbase.dll!abort", 0x40, "unwind_info"),
        Frame(1, 0x7FF000002000, 0x1040, "app.exe", 0x2000, 0x2000, raised_by, 0x40, "unwind_info"),
    ]
    crash = CrashInfo(
        0xC0000409,
        "STATUS_STACK_BUFFER_OVERRUN",
        "fail-fast",
        "0xC0000409 fail-fast",
        1,
        frames[0].ip,
        (7,),
        fastfail_code=7,
        fastfail_name="FAST_FAIL_FATAL_APP_EXIT",
        raised_by=raised_by,
    )
    return Case(crash, None, frames, None, (), Environment(), ())


def test_a_name_in_a_step_does_not_set_off_a_rule():
    # The TensorFlow rule drops TensorFlow's steps without TensorFlow loaded; it once
    # matched the words, and dropped a step naming an abseil function of a program that
    # uses abseil alone.
    v, _ = decide(_abort("app.exe!absl::log_internal::LogMessageFatal::~LogMessageFatal"))
    assert "The call that aborted is in app.exe!absl::log_internal::LogMessageFatal::~LogMessageFatal; " in " ".join(
        v.next_steps
    )
    assert not any("TensorFlow" in s for s in v.next_steps)
    tensorflow = Environment(tensorflow=("C:\\tf\\_pywrap_tensorflow_internal.pyd",))
    with_tf, _ = decide(replace(_abort("app.exe!main"), environment=tensorflow))
    assert with_tf.next_steps[0].startswith("Read the process's stderr just before the crash: TensorFlow/absl")
