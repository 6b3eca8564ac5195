"""render_json writes its indented text itself (json_report._indented): held here to the
text json.dumps(tree, indent=n, ensure_ascii=True) writes, for any tree of JSON values and
for the reports of the sample dumps."""

from __future__ import annotations

import enum
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dumpkit.report import json_report
from dumpkit.report.json_report import render_json, report_dict
from tests.support.samples import sample_path


class _Colour(str, enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from([_Colour.RED, _Level.HIGH, "\u00e9\u4e2d\ud83d\ude00", '\x00\x1f"\\/\u2028', ""])
)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=60,
)


def _json_dumps(tree: object, indent: object) -> str:
    return json.dumps(tree, indent=indent, ensure_ascii=True)


@settings(max_examples=400, deadline=None)
@given(_TREES, st.sampled_from([0, 1, 2, 4]))
def test_the_indented_text_is_json_dumps_text(tree, indent):
    assert json_report._indented(tree, " " * indent) == _json_dumps(tree, indent)


@pytest.mark.parametrize(
    "tree",
    [
        {1: "a"},  # keys json.dumps converts: left to it
        {"a": (1, 2)},  # a tuple (what _convert never leaves)
        [object()],  # what json.dumps refuses
        {"a": {True: None}},
    ],
)
def test_what_convert_never_makes_is_left_to_json_dumps(tree):
    with pytest.raises(json_report._Unusual):
        json_report._indented(tree, "  ")


@pytest.mark.parametrize("indent", [None, 0, 1, 2])
@pytest.mark.parametrize("name", ["recursion_cycle3.dmp", "null_deref.dmp", "tf_env_abort.dmp"])
def test_render_json_writes_what_json_dumps_writes(name, indent):
    from dumpkit.engine import Options, analyze
    from dumpkit.problems import Problems
    from dumpkit.sources.minidump import open_dump

    problems = Problems()
    target = open_dump(str(sample_path(name)), problems)
    report = analyze(target, Options(image_paths=[str(sample_path("bin"))]), problems=problems).report
    assert render_json(report, indent=indent) == _json_dumps(report_dict(report), indent)
