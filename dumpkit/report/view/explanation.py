"""What `dumpkit explain` shows for a code: a heading, the code in every spelling, the
meaning, then sections of paragraphs (mix-ups, causes, next steps, capture help)."""

from __future__ import annotations

from typing import Tuple

from dumpkit.analysis.explain import Explanation, capture_help_for
from dumpkit.records import record


@record
class Section:
    title: str
    items: Tuple[str, ...]  # paragraphs; a line starting with a command is a command
    bullets: bool = True  # a list of items, or running paragraphs


@record
class ExplanationView:
    heading: str  # "0xC00000FD  STATUS_STACK_OVERFLOW"
    spellings: str  # "signed: -1073741571   unsigned: 3221225725   hex: 0xC00000FD"
    summary: str  # one sentence, capitalised, with its full stop
    sections: Tuple[Section, ...]  # only the ones with something to say


__all__ = ["COMMANDS", "Explanation", "ExplanationView", "Section", "capture_advice_view", "explanation_view"]

# Paragraph lines that are commands to type: a renderer never wraps them.
COMMANDS = ("reg add", "procdump", "gflags", "cdb")


KIND_WORDS = {"hresult": "HRESULT", "win32": "Win32 error"}


def _heading(e: Explanation) -> str:
    name = e.name if e.subcode_name is None else f"{e.name} / {e.subcode_name}"
    code = e.code_hex if e.subcode is None else f"{e.code_hex}/{e.subcode}"
    if e.kind in KIND_WORDS:
        return f"{code}  {KIND_WORDS[e.kind]} {name}" if name != e.code_hex else f"{code}  {KIND_WORDS[e.kind]}"
    if e.known or name != e.code_hex:
        return f"{code}  {name}"
    if e.unsigned_decimal < 0x100:
        return f"{code}  exit code {e.unsigned_decimal}"  # an ordinary exit code, explained below
    return f"{code}  (not a code dumpkit knows)"


def explanation_view(e: Explanation, how_to_capture: bool = False) -> ExplanationView:
    """`how_to_capture`: the whole dump-capture advice instead of its one-line pointer."""
    spellings = f"signed: {e.signed_decimal}   unsigned: {e.unsigned_decimal}   hex: {e.code_hex}"
    if e.kind == "win32":
        spellings = f"decimal: {e.unsigned_decimal}   hex: {e.code_hex}"
    if e.subcode is not None:
        spellings += f"   fail-fast subcode: {e.subcode} (0x{e.subcode:X})"
    sections = (
        Section("Did you mean:", (f"{e.suggestion}, a code dumpkit knows?",) if e.suggestion else (), bullets=False),
        Section("Common mix-up:", e.mixups, bullets=False),
        Section("What usually causes it (Python / TensorFlow on Windows):", e.causes),
        Section("What to do next:", e.next_steps),
        Section("Capturing a dump next time:", e.capture_help if how_to_capture else e.capture_pointer),
    )
    return ExplanationView(
        heading=_heading(e),
        spellings=spellings,
        summary=e.summary[:1].upper() + e.summary[1:] + ".",
        sections=tuple(s for s in sections if s.items),
    )


def capture_advice_view() -> ExplanationView:
    """`dumpkit explain --how-to-capture` without a code: the advice for any crash."""
    return ExplanationView(
        "How to capture a crash dump (of a Python process, or any other)",
        "",
        "",
        (Section("", capture_help_for(None)),),
    )
