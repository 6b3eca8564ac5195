"""A stopped Windows process as pymemory reads it: ReadProcessMemory and its modules (a
Toolhelp snapshot). Windows only."""

from __future__ import annotations

import ctypes
import struct
from typing import List, Optional

from dumpkit.capture import win32
from dumpkit.target import MemoryNotInDump, Module

PAGE = 0x1000
MAX_MODULES = 4096


class LiveProcess:
    def __init__(self, handle: int, pid: int):
        self.handle = handle
        self.pid = pid
        self._modules: Optional[List[Module]] = None

    def _read(self, address: int, size: int) -> bytes:
        buf = ctypes.create_string_buffer(size)
        got = ctypes.c_size_t(0)
        ok = win32.ReadProcessMemory(self.handle, ctypes.c_void_p(address), buf, size, ctypes.byref(got))
        return buf.raw[: got.value] if ok else b""

    def read(self, address: int, size: int) -> bytes:
        data = self._read(address, size) if size > 0 else b""
        if len(data) != size:
            raise MemoryNotInDump(address, size)
        return data

    def read_available(self, address: int, size: int) -> bytes:
        """What can be read from `address` on, page by page, up to `size` bytes."""
        out = bytearray()
        while size > 0:
            chunk = min(size, PAGE - (address & (PAGE - 1)))
            data = self._read(address, chunk)
            out += data
            if len(data) < chunk:
                break
            address += chunk
            size -= chunk
        return bytes(out)

    @property
    def modules(self) -> List[Module]:
        if self._modules is None:
            self._modules = self._snapshot()
        return self._modules

    def _snapshot(self) -> List[Module]:
        snap = win32.CreateToolhelp32Snapshot(win32.TH32CS_SNAPMODULE | win32.TH32CS_SNAPMODULE32, self.pid)
        if not snap or snap == win32.INVALID_HANDLE_VALUE:
            return []
        found: List[Module] = []
        try:
            entry = win32.MODULEENTRY32W()
            entry.dwSize = ctypes.sizeof(entry)
            more = win32.Module32FirstW(snap, ctypes.byref(entry))
            while more and len(found) < MAX_MODULES:
                base = entry.modBaseAddr or 0
                found.append(self._module(entry.szModule, entry.szExePath, base, entry.modBaseSize))
                more = win32.Module32NextW(snap, ctypes.byref(entry))
        finally:
            win32.CloseHandle(snap)
        return found

    def _module(self, name: str, path: str, base: int, size: int) -> Module:
        """A module with the TimeDateStamp of its mapped header (dumpkit matches image files
        by it)."""
        stamp = 0
        head = self._read(base, 0x400)
        if len(head) >= 0x40 and head[:2] == b"MZ":
            (pe,) = struct.unpack_from("<I", head, 0x3C)
            if pe + 12 <= len(head) and head[pe : pe + 4] == b"PE\0\0":
                (stamp,) = struct.unpack_from("<I", head, pe + 8)
        return Module(name=name, path=path, base=base, size=size, timestamp=stamp)
