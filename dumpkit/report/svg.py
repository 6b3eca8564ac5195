"""Inline SVG pictures of the view's numbers (report/view/pictures.py) for the HTML page:
no script, no external resource, every label escaped and fitted to the room it has.

Each picture is drawn in a fixed coordinate box WIDTH units wide and scales down with the
page (CSS max-width), so nothing overflows at any window width. Colours are the
Okabe-Ito palette (told apart with the common colour-vision deficiencies), weak
evidence is hatched as well as coloured, and every colour has a text label beside it."""

from __future__ import annotations

import unicodedata
from typing import List, Sequence, Tuple

from dumpkit.report.escape import html_text
from dumpkit.report.view.pictures import (
    FUNCTION,
    MIXED,
    NOT_KEPT,
    OTHER,
    RECURSION,
    BudgetPicture,
    CyclePicture,
    StackByFunction,
    TrustStrip,
)

WIDTH = 720  # coordinate units; the page draws them at most this many pixels wide
PAD = 10
SANS = "system-ui,sans-serif"
MONO = "ui-monospace,monospace"

# Okabe-Ito: blue for what holds or proves, orange/vermillion for what warns
BLUE = "#0072B2"
SKY = "#56B4E9"
GREEN = "#009E73"
ORANGE = "#E69F00"
VERMILLION = "#D55E00"
INDIGO = "#332288"
GREY = "#999999"
LIGHT = "#EEF2F5"
INK = "#222222"
DIM = "#555555"

TRUST_COLOURS = {
    "context": INDIGO,
    "unwind_info": BLUE,
    "prologue": SKY,
    "frame_pointer": GREEN,
    "scan_validated": ORANGE,
    "scan": VERMILLION,
    MIXED: GREY,
}
HATCHED_TRUST = ("scan_validated", "scan", MIXED)  # found by scanning (or unknown): hatched too
_DARK_FILLS = (INDIGO, BLUE, GREEN, VERMILLION)  # white text reads on these, ink on the rest


# --------------------------------------------------------------------------- helpers


def _em(c: str, mono: bool) -> float:
    """A generous width of one character in em: CJK and other wide characters take a whole one."""
    if ord(c) > 0x1000 and unicodedata.east_asian_width(c) in "WF":
        return 1.05
    return 0.62 if mono else 0.6


def text_width(s: str, size: float, mono: bool = False) -> float:
    """A generous estimate of the drawn width: labels are fitted by it, never measured."""
    return sum(_em(c, mono) for c in s) * size


def fit(s: str, size: float, room: float, mono: bool = False) -> str:
    """`s` cut with an ellipsis so that it fits `room` units."""
    if text_width(s, size, mono) <= room:
        return s
    used, keep = size, 0  # the ellipsis first
    for c in s:
        used += _em(c, mono) * size
        if used > room:
            break
        keep += 1
    return s[:keep] + "\u2026"


def esc(s: str) -> str:
    return html_text(s, 100_000)


def _text(
    x: float,
    y: float,
    s: str,
    room: float,
    size: float = 12,
    mono: bool = False,
    anchor: str = "start",
    fill: str = INK,
    weight: str = "normal",
    halo: bool = False,
) -> str:
    shown = fit(s, size, room, mono)
    tooltip = f"<title>{esc(s)}</title>" if shown != s else ""
    bold = ' font-weight="bold"' if weight != "normal" else ""
    if halo:
        bold += ' stroke="#ffffff" stroke-width="3" paint-order="stroke"'
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-family="{MONO if mono else SANS}" font-size="{size}"'
        f' text-anchor="{anchor}" fill="{fill}"{bold}>{tooltip}{esc(shown)}</text>'
    )


def _rect(x: float, y: float, w: float, h: float, fill: str, extra: str = "") -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" fill="{fill}"{extra}/>'


def _hatch(uid: str, colour: str, name: str = "hatch") -> str:
    """A pattern of diagonal lines in `colour` on white-ish stripes: `url(#uid-name)`."""
    return (
        f'<pattern id="{uid}-{name}" width="6" height="6" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{colour}"/>'
        f'<rect width="2" height="6" fill="#ffffff" fill-opacity="0.55"/></pattern>'
    )


def _svg(uid: str, height: float, label: str, defs: Sequence[str], body: Sequence[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="pic" id="{uid}" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'width="{WIDTH}" height="{height:.0f}" role="img" aria-label="{esc(label)}">'
        f"<title>{esc(label)}</title>" + (f"<defs>{''.join(defs)}</defs>" if defs else "") + "".join(body) + "</svg>"
    )


def _legend(y: float, items: Sequence[Tuple[str, str]], size: float = 12) -> Tuple[List[str], float]:
    """Swatch + label entries left to right, wrapping at the right edge: (elements, height)."""
    out: List[str] = []
    x, line = float(PAD), 0
    step = size + 8
    for fill, label in items:
        need = 16 + text_width(label, size) + 18
        if x > PAD and x + need > WIDTH - PAD:
            x, line = PAD, line + 1
        top = y + line * step
        out.append(_rect(x, top, 12, 12, fill, ' stroke="#666" stroke-width="0.5"'))
        out.append(_text(x + 16, top + 10.5, label, WIDTH - PAD - x - 16, size))
        x += need
    return out, (line + 1) * step if items else 0


# --------------------------------------------------------------------------- stack budget


def budget_svg(p: BudgetPicture, uid: str = "budget") -> str:
    """The stack from its base (left) toward its reserve's end: used, guard, the end of
    the reserve, and a request that died allocating drawn from the used part on."""
    request = p.request.bytes if p.request is not None else 0
    axis = max(p.reserve, p.used + request, 1)
    span = WIDTH - 2 * PAD

    def at(n: int) -> float:
        return PAD + span * min(n, axis) / axis

    end = at(p.reserve)
    band_y, band_h = 24.0, 34.0
    body: List[str] = []
    # the top line: where the stack starts and where its reserve ends
    label_w = text_width(p.reserve_label, 12)
    if end - PAD >= label_w + 90:
        body.append(_text(end - 5, 15, p.reserve_label, end - PAD - 80, 12, anchor="end", weight="bold"))
        base_room = end - PAD - label_w - 20
    else:
        body.append(_text(end + 5, 15, p.reserve_label, WIDTH - PAD - end - 5, 12, weight="bold"))
        base_room = end - PAD - 8
    for words in ("stack base \u2192 grows toward lower addresses", "stack base \u2192", "base"):
        if text_width(words, 11) <= base_room:
            body.append(_text(PAD, 15, words, base_room, 11, fill=DIM))
            break
    # the band: the reserve, the used part, the guard region
    body.append(_rect(PAD, band_y, end - PAD, band_h, LIGHT, ' class="reserve" stroke="#777" stroke-width="1"'))
    if p.used:
        body.append(_rect(PAD, band_y, max(at(p.used) - PAD, 2), band_h, BLUE, ' class="used"'))
    if p.guard is not None:
        g0, g1 = at(p.guard[0]), at(p.guard[1])
        width = max(g1 - g0, 5)
        # at least visible: widened toward the reserve's end, never past it
        body.append(_rect(min(g0, end - width), band_y, width, band_h, f"url(#{uid}-guard)", ' class="guard"'))
    if p.committed is not None:
        c = at(p.committed)
        body.append(
            f'<line x1="{c:.1f}" y1="{band_y - 4}" x2="{c:.1f}" y2="{band_y + band_h + 4}" stroke="{INK}" stroke-dasharray="3 2"/>'
        )
    # the used label, inside the band when it fits there
    used_x = at(p.used)
    if used_x - PAD > text_width(p.used_label, 13) + 12:
        body.append(_text(PAD + 6, band_y + 22, p.used_label, used_x - PAD - 12, 13, fill="#ffffff", weight="bold"))
    else:
        body.append(_text(used_x + 6, band_y + 22, p.used_label, max(end - used_x - 20, 120), 13, weight="bold"))
    y = band_y + band_h
    line_end = y + 4
    if p.request is not None:
        r0, r1 = at(p.used), at(p.used + p.request.bytes)
        body.append(
            _rect(r0, y + 8, max(r1 - r0, 3), 24, f"url(#{uid}-request)", f' class="request" stroke="{VERMILLION}"')
        )
        y += 8 + 24
        line_end = y + 4
        body.append(_text(PAD, y + 18, p.request.label, WIDTH - 2 * PAD, 13, fill="#A0410A", weight="bold"))
        y += 24
        if p.request.versus:
            body.append(_text(PAD, y + 14, p.request.versus, WIDTH - 2 * PAD, 13, fill="#A0410A"))
            y += 20
    # the end of the reserve, across the band and the request
    body.append(
        f'<line x1="{end:.1f}" y1="18" x2="{end:.1f}" y2="{line_end:.1f}" stroke="{INK}" stroke-width="1.5" stroke-dasharray="5 3"/>'
    )
    items = [(BLUE, p.used_label), (LIGHT, "reserved, unused")]
    if p.guard is not None:
        items.append((f"url(#{uid}-guard)", p.guard_label + (" (estimated)" if p.guard_estimated else "")))
    if p.request is not None:
        items.append((f"url(#{uid}-request)", "asked for, never allocated"))
    if p.committed is not None:
        items.append(("#ffffff", "dashed: committed down to here"))
    legend, h = _legend(y + 14, items)
    body += legend
    defs = [_hatch(uid, ORANGE, "guard"), _hatch(uid, VERMILLION, "request")]
    return _svg(uid, y + 14 + h + 4, p.caption, defs, body)


# --------------------------------------------------------------------------- recursion


def cycle_svg(p: CyclePicture, uid: str = "cycle") -> str:
    """The members as boxes in call order, each with its bytes per repetition, and an
    arrow from the last back to the first carrying the repetitions."""
    box_x, box_w, box_h, gap = PAD, 470.0, 32.0, 16.0
    loop_x = box_x + box_w + 22
    label_x = loop_x + 14
    rows = len(p.members) + (1 if p.more else 0)
    body: List[str] = []
    top = 8.0
    for i, m in enumerate(p.members):
        y = top + i * (box_h + gap)
        body.append(_rect(box_x, y, box_w, box_h, LIGHT, f' stroke="{BLUE}" stroke-width="1.5" rx="4"'))
        body.append(_text(box_x + 8, y + 16, m.function, box_w - 90, 12, mono=True))
        body.append(_text(box_x + box_w - 8, y + 16, m.label, 76, 12, anchor="end", weight="bold"))
        if m.bytes is not None and p.per_repetition:
            share = min(m.bytes / p.per_repetition, 1.0)
            body.append(_rect(box_x + 8, y + box_h - 9, max((box_w - 16) * share, 2), 5, BLUE))
        if i + 1 < rows:
            ax = box_x + 40
            body.append(
                f'<line x1="{ax}" y1="{y + box_h:.1f}" x2="{ax}" y2="{y + box_h + gap - 2:.1f}" stroke="{INK}" '
                f'stroke-width="1.5" marker-end="url(#{uid}-arrow)"/>'
            )
            body.append(_text(ax + 8, y + box_h + 12, "calls", 60, 10, fill=DIM))
    if p.more:
        y = top + len(p.members) * (box_h + gap)
        body.append(_rect(box_x, y, box_w, box_h, "#ffffff", ' stroke="#777" stroke-dasharray="4 3" rx="4"'))
        body.append(_text(box_x + 8, y + 20, f"\u2026 {p.more:,} more in the cycle", box_w - 16, 12, fill=DIM))
    first_mid = top + box_h / 2
    last_mid = top + (rows - 1) * (box_h + gap) + box_h / 2
    if rows == 1:
        first_mid, last_mid = first_mid - 7, first_mid + 7
    body.append(
        f'<path d="M{box_x + box_w:.1f},{last_mid:.1f} H{loop_x:.1f} V{first_mid:.1f} H{box_x + box_w + 3:.1f}" '
        f'fill="none" stroke="{BLUE}" stroke-width="2.5" marker-end="url(#{uid}-arrow-blue)"/>'
    )
    room = WIDTH - PAD - label_x
    texts = [
        (p.repetitions_label, 24, INK, "bold"),
        (p.per_repetition_label, 13, INK, "bold"),
        (p.total_label, 12, DIM, "normal"),
        (p.share_label, 12, DIM, "normal"),
    ]
    y = max(first_mid - 4, 26.0)
    for s, size, colour, weight in texts:
        if s:
            body.append(_text(label_x, y, s, room, size, fill=colour, weight=weight))
            y += size + 6
    height = max(top + rows * (box_h + gap) - gap + 8, y)
    defs = [
        f'<marker id="{uid}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{INK}"/></marker>',
        f'<marker id="{uid}-arrow-blue" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" markerHeight="5" '
        f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{BLUE}"/></marker>',
    ]
    return _svg(uid, height, p.caption, defs, body)


# --------------------------------------------------------------------------- bytes by function

_BAR_FILLS = {RECURSION: BLUE, FUNCTION: SKY, OTHER: "#BBBBBB"}


def by_function_svg(p: StackByFunction, uid: str = "byfn") -> str:
    """One bar per function, longest first, scaled to the largest."""
    name_w, bar_x, bar_w = 300.0, PAD + 306.0, 270.0
    value_x = bar_x + bar_w + 8
    row_h = 22.0
    largest = max((b.bytes for b in p.bars), default=1) or 1
    body: List[str] = []
    for i, b in enumerate(p.bars):
        y = 6 + i * row_h
        name = ("\u21bb " if b.kind == RECURSION else "") + b.name
        mono = b.kind in (RECURSION, FUNCTION)
        body.append(_text(PAD, y + 14, name, name_w, 12, mono=mono, fill=INK if mono else DIM))
        fill = f"url(#{uid}-notkept)" if b.kind == NOT_KEPT else _BAR_FILLS.get(b.kind, SKY)
        body.append(_rect(bar_x, y + 3, max(bar_w * b.bytes / largest, 2 if b.bytes else 0), row_h - 7, fill))
        body.append(_text(value_x, y + 14, b.label, WIDTH - PAD - value_x, 12))
    y = 6 + len(p.bars) * row_h + 8
    items = [(BLUE, "\u21bb member of the recursion")] if any(b.kind == RECURSION for b in p.bars) else []
    if any(b.kind == FUNCTION for b in p.bars):
        items.append((SKY, "other functions on the stack"))
    if any(b.kind == NOT_KEPT for b in p.bars):
        items.append((f"url(#{uid}-notkept)", "frames the report did not keep"))
    legend, h = _legend(y, items)
    return _svg(uid, y + h + 2, p.caption, [_hatch(uid, GREY, "notkept")], body + legend)


# --------------------------------------------------------------------------- how frames were found


def _widths(counts: Sequence[int], span: float) -> List[float]:
    """Each run's share of `span` by its frames, with a minimum so that a one-frame run
    beside a million-frame one can still be seen."""
    n = len(counts)
    if not n:
        return []
    least = min(6.0, span / n)
    total = sum(counts) or 1
    spare = span - least * n
    return [least + spare * c / total for c in counts]


def trust_svg(p: TrustStrip, uid: str = "trust") -> str:
    span = WIDTH - 2 * PAD
    strip_y, strip_h = 6.0, 30.0
    body: List[str] = []
    x = float(PAD)
    for run, w in zip(p.runs, _widths([r.frames for r in p.runs], span)):
        colour = TRUST_COLOURS.get(run.trust, GREY)
        fill = f"url(#{uid}-{run.trust})" if run.trust in HATCHED_TRUST else colour
        body.append(f"<g><title>{esc(run.label)}</title>{_rect(x, strip_y, w, strip_h, fill)}</g>")
        inside = f"{run.trust} {run.frames:,}"
        if w > text_width(inside, 11) + 10:
            if run.trust in HATCHED_TRUST:  # ink with a white halo reads on stripes
                body.append(_text(x + w / 2, strip_y + 19, inside, w - 8, 11, anchor="middle", halo=True))
            else:
                ink = "#ffffff" if colour in _DARK_FILLS else INK
                body.append(_text(x + w / 2, strip_y + 19, inside, w - 8, 11, anchor="middle", fill=ink))
        x += w
    body.append(_rect(PAD, strip_y, span, strip_h, "none", ' stroke="#666" stroke-width="0.5"'))
    last = p.frames - 1
    body.append(_text(PAD, strip_y + strip_h + 15, "frame 0 (where it stopped)", span / 2, 11, fill=DIM))
    body.append(
        _text(
            WIDTH - PAD,
            strip_y + strip_h + 15,
            f"frame {last:,} (thread start)",
            span / 2 - 10,
            11,
            anchor="end",
            fill=DIM,
        )
    )
    fills = [
        (f"url(#{uid}-{k})" if k in HATCHED_TRUST else TRUST_COLOURS.get(k, GREY), f"{k} {n:,}") for k, n in p.legend
    ]
    if any(r.trust == MIXED for r in p.runs):
        fills.append((f"url(#{uid}-{MIXED})", "not kept, found in several ways"))
    legend, h = _legend(strip_y + strip_h + 26, fills)
    defs = [_hatch(uid, TRUST_COLOURS[k], k) for k in HATCHED_TRUST]
    return _svg(uid, strip_y + strip_h + 26 + h + 2, p.caption, defs, body + legend)
