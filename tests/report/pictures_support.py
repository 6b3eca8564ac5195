"""Shared by the picture tests: the sample dumps' reports (one analysis per dump per
session) and the SVG elements of a rendered page, parsed as XML."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from tests.support.samples import analyse_file, SAMPLE_BIN, SAMPLES, plain_dump, sample_manifest

SVG_NS = "{http://www.w3.org/2000/svg}"
STACK_CLASSES = ("recursion", "oversized_frame", "stack_overflow")

_REPORTS: Dict[str, object] = {}


def manifest_cases(where: Callable[[dict], bool] = lambda facts: True) -> List[object]:
    """One pytest param per sample dump of the manifest that `where` accepts (the xz'd
    ones, big to decompress and walk, marked slow)."""
    cases = []
    for facts in sample_manifest():
        if where(facts):
            name = facts["file"]
            marks = [pytest.mark.slow] if name.endswith(".xz") else []
            cases.append(pytest.param(facts, id=name, marks=marks))
    return cases


def sample_report(name: str, tmp_root: Path):
    """The Report of sample_dumps/NAME, analysed with the bundled images."""
    if name not in _REPORTS:
        from dumpkit.engine import Options

        path = SAMPLES / name
        if not path.exists():
            pytest.skip(f"sample dump {name} not present")
        dump = plain_dump(path, tmp_root)
        _REPORTS[name] = analyse_file(str(dump), Options(image_paths=[str(SAMPLE_BIN)]))
    return _REPORTS[name]


def svgs(page: str) -> Dict[str, ET.Element]:
    """The page's pictures by their figure's class (budget, cycle, by-function, trust),
    each parsed as XML: a label that escaped badly would not parse."""
    out = {}
    for kind, svg in re.findall(r'<figure class="([\w-]+)">(<svg .*?</svg>)', page, re.S):
        out.setdefault(kind, ET.fromstring(svg))
    return out


def texts(svg: ET.Element) -> List[str]:
    """The drawn text of every <text> element (not its tooltip)."""
    return [
        "".join(t.itertext()) if t.find(f"{SVG_NS}title") is None else (t.find(f"{SVG_NS}title").tail or "")
        for t in svg.iter(f"{SVG_NS}text")
    ]


def rects(svg: ET.Element, fill: str) -> List[ET.Element]:
    return [r for r in svg.iter(f"{SVG_NS}rect") if r.get("fill") == fill]


def part(svg: ET.Element, name: str) -> ET.Element:
    """The one shape of a picture drawn for `name` (class="reserve", "used", "request"...)."""
    (found,) = [r for r in svg.iter() if r.get("class") == name]
    return found
