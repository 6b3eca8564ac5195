"""A delay-load failure read from the dump: which DLL, which function, and why.

A DLL linked with /DELAYLOAD is loaded at the first call into it by the linker's helper,
`__delayLoadHelper2` (MSVC's delayhlp.cpp, mingw-w64's delayimp.c). When LoadLibrary or
GetProcAddress fails and no failure hook steps in, the helper raises 0xC06D007E (the DLL)
or 0xC06D007F (the function) with one parameter: the address of its `DelayLoadInfo`, a
local of the helper, so on the raising thread's stack, which every dump holds. It names
the DLL (`szDll`) and the function (`dlp`), both pointers into the importing module's
delay-import tables (read-only data: the module's image has them when the dump does not),
the module the DLL was loaded as (`hmodCur`, when GetProcAddress failed) and the error
LoadLibrary or GetProcAddress set (`dwLastError`).

Every read is bounded: one DelayLoadInfo, two strings of at most MAX_NAME bytes."""

from __future__ import annotations

import re
import struct
from typing import Callable, List, Optional, Sequence, Tuple

from dumpkit.analysis.model import DelayLoadFailure
from dumpkit.target import Module
from dumpkit.unwind.disasm import call_target
from dumpkit.unwind.frames import Frame

Read = Callable[[int, int], bytes]  # the bytes at an address (maybe fewer): the dump, then the image

MAX_NAME = 260  # a DLL's or function's name, bytes at most (MAX_PATH)
MAX_CALLER_FRAMES = 32  # frames from the top searched for the call through the import slot
# DelayLoadInfo by pointer size: its size (the `cb` the helper sets), and the offsets of
# pidd, ppfn, szDll, dlp.fImportByName, dlp.szProcName / dwOrdinal, hmodCur, dwLastError
_LAYOUT = {8: (0x48, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x40), 4: (0x24, 0x04, 0x08, 0x0C, 0x10, 0x14, 0x18, 0x20)}
_NAME = re.compile(rb"[\x21-\x7e][\x20-\x7e]*")  # printable ASCII, no leading space


def delay_load_failure(
    parameters: Sequence[int],
    pointer_size: int,
    read: Read,
    module_at: Callable[[int], Optional[Module]],
    modules: Sequence[Module] = (),
) -> DelayLoadFailure:
    """What the exception's DelayLoadInfo says. `parameters`: the exception's; `read`: the
    dump's memory, then the module images; `module_at(address)`: the loaded module holding
    an address; `modules`: every loaded module, for the ones named like the DLL. What
    cannot be read is said in `unread`, with where it lies."""
    if not parameters:
        return DelayLoadFailure(info_address=None, unread=("the exception has no parameter: no DelayLoadInfo to read",))
    info = parameters[0]
    layout = _LAYOUT.get(pointer_size, _LAYOUT[8])
    size, o_pidd, o_ppfn, o_dll, o_by_name, o_proc, o_hmod, o_error = layout
    raw = read(info, size)
    if len(raw) < size:
        return DelayLoadFailure(
            info_address=info, unread=(f"the DelayLoadInfo at {info:#x} (exception parameter 0) is not in the dump",)
        )
    ptr = "<Q" if pointer_size == 8 else "<I"
    cb = struct.unpack_from("<I", raw, 0)[0]
    if cb != size:
        return DelayLoadFailure(
            info_address=info,
            unread=(
                f"the DelayLoadInfo at {info:#x} says its size is {cb:#x}, not {size:#x}: "
                "not a delay-load helper's record, left unread",
            ),
        )
    pidd, ppfn, sz_dll, sz_proc, hmod = (
        struct.unpack_from(ptr, raw, o)[0] for o in (o_pidd, o_ppfn, o_dll, o_proc, o_hmod)
    )
    by_name = struct.unpack_from("<I", raw, o_by_name)[0] != 0
    last_error = struct.unpack_from("<I", raw, o_error)[0]
    unread: List[str] = []
    importer = next((m for m in (module_at(a) for a in (pidd, ppfn, sz_dll) if a) if m is not None), None)
    dll = _name(read, sz_dll, "the DLL's name", module_at, unread)
    function = ordinal = None
    if by_name:
        function = _name(read, sz_proc, "the function's name", module_at, unread)
    else:
        ordinal = sz_proc & 0xFFFF  # IMAGE_ORDINAL: the low 16 bits
    loaded = module_at(hmod) if hmod else None
    if loaded is not None and loaded.base != hmod:
        loaded = None
    return DelayLoadFailure(
        info_address=info,
        dll=dll,
        function=function,
        ordinal=ordinal,
        last_error=last_error or None,
        importer=importer.name if importer is not None else None,
        loaded=loaded.path or loaded.name if loaded is not None else None,
        loaded_version=loaded.file_version if loaded is not None else None,
        similar=similar_modules(dll, modules) if dll is not None else (),
        slot_address=ppfn or None,
        unread=tuple(unread),
    )


def _name(
    read: Read, address: int, what: str, module_at: Callable[[int], Optional[Module]], unread: List[str]
) -> Optional[str]:
    """A C string of printable ASCII at `address`, or None with the reason in `unread`."""
    if not address:
        unread.append(f"{what}: its pointer is NULL")
        return None
    raw = read(address, MAX_NAME)
    end = raw.find(b"\0")
    m = _NAME.fullmatch(raw[:end]) if end > 0 else None
    if m is not None:
        return m.group(0).decode("ascii")
    module = module_at(address)
    where = f"{module.name}+{address - module.base:#x}" if module is not None else f"{address:#x}"
    if not raw:
        held = f"in the image of {module.name}, which was not found here" if module is not None else "in no module"
        unread.append(f"{what} lies at {where}, {held}, and not in the dump")
    else:
        unread.append(f"{what} at {where} is not a readable name")
    return None


def calling_frame(frames: Sequence[Frame], slot: int, read_code: Read) -> Optional[Frame]:
    """The frame that called through the delay-import slot: its return address follows a
    `call [rip+d]` reading `slot`, or a `call rel32` to a `jmp [rip+d]` stub reading it (a
    call to a function declared without dllimport). Above it are only the helper and its
    thunk. At most MAX_CALLER_FRAMES frames are looked at."""
    for f in frames[1:MAX_CALLER_FRAMES]:
        before = read_code(f.ip - 6, 6)
        if len(before) != 6:
            continue
        if before[:2] == b"\xff\x15" and _rip_relative(before, f.ip) == slot:
            return f
        stub = call_target(before, f.ip)
        if stub is not None:
            jump = read_code(stub, 6)
            if len(jump) == 6 and jump[:2] == b"\xff\x25" and _rip_relative(jump, stub + 6) == slot:
                return f
    return None


def _rip_relative(instruction: bytes, next_ip: int) -> int:
    """The address a 6-byte `ff 15/25 disp32` instruction ending at `next_ip` reads."""
    return (next_ip + int.from_bytes(instruction[2:6], "little", signed=True)) & 0xFFFFFFFFFFFFFFFF


def similar_modules(dll: str, modules: Sequence[Module]) -> Tuple[str, ...]:
    """Loaded modules of the same family as the DLL that failed (`cudnn64_9.dll` for
    `cudnn64_8.dll`): the letters before its first digit or underscore, another name."""
    stem = _stem(dll)
    if len(stem) < 3:
        return ()
    lower = dll.lower()
    return tuple(sorted({m.name for m in modules if m.name.lower() != lower and _stem(m.name) == stem}))


def _stem(name: str) -> str:
    m = re.match(r"[a-z]+", name.lower())
    return m.group(0) if m else ""
