"""What a function's code refers to: the string literals it loads and the functions it
calls directly. Unnamed code (a static function of an MSVC module without its PDB) is
still recognisable by them: CPython's json encoder loads "Circular reference detected",
its pickler "__reduce__ must return a string or tuple", list_repr calls Py_ReprEnter.

Bounded: at most `max_bytes` of code from the function's start are decoded, and the
decode stops at the function's end when it is known. A function MSVC split into chained
fragments is read part by part and the parts' facts `merged`."""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Tuple

from dumpkit.unwind.frames import without_offset
from dumpkit.records import record

ReadCode = Callable[[int, int], bytes]
NameAt = Callable[[int], Optional[str]]

MAX_BYTES = 0x1000
MAX_STRING = 96  # a message is recognised by its start; longer ones are cut
MIN_STRING = 4


@record
class CodeFacts:
    strings: Tuple[str, ...]  # printable ASCII literals loaded with `lea reg, [rip + x]`, in code order
    callees: Tuple[str, ...]  # names of direct call targets (module!name), in code order, each once


def _literal(read_code: ReadCode, address: int) -> Optional[str]:
    raw = read_code(address, MAX_STRING)
    text = raw.split(b"\0", 1)[0]
    if len(text) < MIN_STRING or not all(32 <= c < 127 for c in text):
        return None
    return text.decode("ascii")


def code_facts(
    read_code: ReadCode, start: int, end: Optional[int], name_at: NameAt, max_bytes: int = MAX_BYTES
) -> CodeFacts:
    """The literals and direct callees of x64 code from `start` to `end` (or `max_bytes`)."""
    size = min(max_bytes, end - start) if end is not None and end > start else max_bytes
    code = read_code(start, size)
    strings: List[str] = []
    callees: List[str] = []
    from dumpkit.unwind.decoder import INS_CALL, INS_INT3, INS_LEA, OP_IMM, REG_RIP, detailed  # (it says why here)

    for ins in detailed(code, start):
        if ins.id == INS_LEA and len(ins.operands) == 2:
            mem = ins.operands[1].mem
            if mem.base == REG_RIP:
                text = _literal(read_code, ins.address + ins.size + mem.disp)
                if text is not None and text not in strings:
                    strings.append(text)
        elif ins.id == INS_CALL and ins.operands and ins.operands[0].type == OP_IMM:
            name = name_at(ins.operands[0].imm)
            if name:
                callees.append(without_offset(name))
        elif ins.id == INS_INT3 and end is None:
            break  # padding after the function: what follows is another function
    return CodeFacts(tuple(strings), tuple(dict.fromkeys(callees)))


def merged(parts: Iterable[CodeFacts]) -> CodeFacts:
    """The facts of one function's parts (its primary part, then fragments), each once."""
    strings: List[str] = []
    callees: List[str] = []
    for part in parts:
        strings += part.strings
        callees += part.callees
    return CodeFacts(tuple(dict.fromkeys(strings)), tuple(dict.fromkeys(callees)))
