"""The HTML report as a browser draws it: Debian's headless Chromium loads the real sample
reports at 1280 and 800 px wide, screenshots them, and the rendered page is measured: it
asks for nothing but its own file, every picture has a real, bounded size, every label
lies inside its picture and clear of the others, the page never scrolls sideways, and
the pictures the crash calls for are there."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from dumpkit.report.html import render_html
from tests.support.samples import analyse_file, real_dump
from tests.report.chromium import Chromium, chromium_path
from tests.report.pictures_support import STACK_CLASSES, manifest_cases, sample_report

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium_path() is None, reason="chromium not installed (apt-get install chromium)"),
]

WIDTHS = (1280, 800)
MAX_PICTURE_HEIGHT = 700  # px: a picture taller than this has lost its layout

# What the page looks like once drawn, measured in the page itself.
MEASURE = """(() => {
  const pictures = [...document.querySelectorAll('figure > svg.pic')].map(svg => {
    const box = svg.getBoundingClientRect();
    const view = svg.viewBox.baseVal;
    const outside = [...svg.querySelectorAll('text, rect')].filter(el => {
      const b = el.getBBox();
      return b.x < -0.5 || b.y < -0.5 || b.x + b.width > view.width + 0.5 || b.y + b.height > view.height + 0.5;
    }).map(el => el.tagName + ': ' + el.textContent.slice(0, 60));
    const boxes = [...svg.querySelectorAll('text')].map(el => [el.getBBox(), el.textContent.slice(0, 40)]);
    const overlapping = [];
    boxes.forEach(([a, ta], i) => boxes.slice(i + 1).forEach(([b, tb]) => {
      const w = Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x);
      const h = Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y);
      if (w > 1 && h > 1) overlapping.push(ta + ' / ' + tb);
    }));
    return {kind: svg.parentElement.className, width: box.width, height: box.height, outside, overlapping};
  });
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    bodyWidth: document.body.getBoundingClientRect().width,
    scripts: document.scripts.length,
    pictures,
  };
})()"""


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    assert path is not None
    with Chromium(path) as b:
        yield b


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("chromium")


def _png_size(path: Path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def _render(browser, page_path: Path, tmp: Path):
    """Each width: (measurements, screenshot path)."""
    out = {}
    for width in WIDTHS:
        page = browser.page(page_path, width)
        try:
            assert page.requests and all(u.startswith("file:") for u in page.requests), page.requests
            seen = page.evaluate(MEASURE)
            shot = tmp / f"{page_path.stem}-{width}.png"
            page.screenshot(shot, clip_height=3000)
        finally:
            page.close()
        out[width] = (seen, shot)
    return out


def _check_layout(width: int, seen: dict, shot: Path) -> None:
    assert seen["scripts"] == 0
    assert seen["scrollWidth"] <= seen["innerWidth"] == width, f"the page scrolls sideways at {width} px"
    for pic in seen["pictures"]:
        assert 100 < pic["width"] <= seen["bodyWidth"] + 0.5, pic
        assert 20 < pic["height"] <= MAX_PICTURE_HEIGHT, pic
        assert not pic["outside"], f"{pic['kind']}: drawn outside the picture: {pic['outside']}"
        assert not pic["overlapping"], f"{pic['kind']}: labels drawn over each other: {pic['overlapping']}"
    shot_width, shot_height = _png_size(shot)
    assert shot_width == width and shot_height > 200


@pytest.mark.parametrize("facts", manifest_cases())
def test_sample_reports_render_with_their_pictures_at_both_widths(facts, browser, tmp_root):
    page_path = tmp_root / (facts["file"].split(".")[0] + ".html")
    page_path.write_text(render_html(sample_report(facts["file"], tmp_root)), encoding="utf-8")
    for width, (seen, shot) in _render(browser, page_path, tmp_root).items():
        _check_layout(width, seen, shot)
        kinds = [p["kind"] for p in seen["pictures"]]
        stack = facts["expected_class"] in STACK_CLASSES
        assert ("budget" in kinds) == stack
        assert ("by-function" in kinds) == (stack and not facts["oversized_bytes"])
        assert ("cycle" in kinds) == bool(facts["cycle_functions"])
        assert kinds.count("trust") == 1


REAL = (
    "rust-minidump/stability-report.dmp",  # 131 frames, mostly found by scanning
    "breakpad/stack_exhaustion.dmp",  # a 32-bit recursion of 4 KiB frames
    "node-minidump/windows.dmp",  # 261 frames, the middle not kept
)


@pytest.mark.parametrize("rel", REAL)
def test_real_third_party_reports_render_within_the_page(rel, browser, tmp_root):
    from dumpkit.engine import Options

    report = analyse_file(str(real_dump(rel)), Options())
    page_path = tmp_root / (rel.replace("/", "--") + ".html")
    page_path.write_text(render_html(report), encoding="utf-8")
    for width, (seen, shot) in _render(browser, page_path, tmp_root).items():
        _check_layout(width, seen, shot)
        assert "trust" in [p["kind"] for p in seen["pictures"]]


HOSTILE_NAMES = (
    "m.dll!" + "std::vector<std::basic_string<char>>::_Emplace_reallocate" * 40,  # 2,000+ characters
    "m.dll!" + "\u6df1\u5ea6\u5b66\u7fd2\u30ab\u30fc\u30cd\u30eb" * 30,  # wide characters
    "m.dll!<b>&amp;</b>" + "W" * 300,  # the widest Latin letter, and markup
)


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=("long", "wide", "markup"))
def test_names_the_pictures_cannot_hold_are_cut_inside_them(name, browser, tmp_root):
    from dumpkit.analysis.model import Cycle
    from tests.support.builders import budget, frame, report, thread

    frames = tuple(frame(i, name=name + "+0x1") for i in range(40))
    cyc = Cycle((name,), 1, 40, 0x40, 0, 39, 40 * 0x40, stack_share=0.99)
    t = thread(1, frames, crashing=True, cycles=(cyc,), budget=budget(used=41 * 0x40, reserve=41 * 0x40 + 0x1000))
    page_path = tmp_root / f"hostile-{HOSTILE_NAMES.index(name)}.html"
    page_path.write_text(render_html(report([t], kind="recursion")), encoding="utf-8")
    for width, (seen, shot) in _render(browser, page_path, tmp_root).items():
        _check_layout(width, seen, shot)
        assert {"cycle", "by-function", "trust", "budget"} <= {p["kind"] for p in seen["pictures"]}
