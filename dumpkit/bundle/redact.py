"""`dumpkit bundle --redact`: a copy of the dump without the user's name in paths and
without the process environment block, so a bundle can be attached to a public issue.

Bytes are replaced in place, never removed, so every stream, string length and memory
range of the dump stays where it was and the copy reads exactly like the original:
- user names: the NAME of `...\\Users\\NAME\\`, `...\\Documents and Settings\\NAME\\` and
  `/home/NAME/` found in the module paths becomes `*` (as many as it has characters)
  wherever such a path appears in the dump, in UTF-16 and in 8-bit text, any letter case
  (module records, the command line, Python's file names in a full-memory dump);
- the environment block (PEB -> ProcessParameters -> Environment, x64 and x86), every
  copy of it in the file, becomes zeros: an empty environment."""

from __future__ import annotations

import re
from typing import List, Optional, Set, Tuple

from dumpkit.target import Target

__all__ = ["redact_dump", "user_names"]

_PROFILE = re.compile(r"(?:^|[\\/])(?:users|documents and settings|home)[\\/]([^\\/]{1,128})[\\/]", re.I)
_NOT_A_USER = {"public", "default", "default user", "all users", "*"}
MAX_ENVIRONMENT = 1 << 20  # bytes of environment block looked at
_ENV_CHUNK = 1 << 12

# (TEB -> PEB, PEB -> ProcessParameters, ProcessParameters -> Environment, pointer size)
_LAYOUTS = {64: (0x60, 0x20, 0x80, 8), 32: (0x30, 0x10, 0x48, 4)}


def user_names(target: Target) -> List[str]:
    """The user-profile folder names in the dump's module paths, longest first."""
    names: Set[str] = set()
    paths = [m.path for m in target.modules] + [u.name for u in target.unloaded_modules]
    for path in paths[:100_000]:
        for m in _PROFILE.finditer(path or ""):
            name = m.group(1)
            if name.lower() not in _NOT_A_USER and name.strip(". "):
                names.add(name)
    return sorted(names, key=lambda n: (-len(n), n))


def _redact_names(data: bytearray, names: List[str]) -> int:
    """Replace each NAME that follows a profile folder; returns how many were replaced.
    Matched on an ASCII-lowercased copy (one pass per name and encoding, at C speed), so
    any letter case of ASCII names is found; offsets are the same in the copy."""
    count = 0
    low = bytes(data).lower()
    for name in names:
        for enc in ("utf-16-le", "utf-8"):
            sep = b"(?:" + re.escape("\\".encode(enc)) + b"|" + re.escape("/".encode(enc)) + b")"
            parents = b"|".join(re.escape(p.encode(enc)) for p in ("users", "documents and settings", "home"))
            wanted = re.escape(name.encode(enc).lower())
            pattern = re.compile(b"(?:" + parents + b")" + sep + b"(" + wanted + b")(?=" + sep + b")")
            stars = ("*" * len(name)).encode(enc)
            for m in pattern.finditer(low):
                if m.end(1) - m.start(1) == len(stars):
                    data[m.start(1) : m.end(1)] = stars
                    count += 1
    return count


def _pointer(target: Target, address: int, size: int) -> Optional[int]:
    raw = target.read_available(address, size)
    return int.from_bytes(raw, "little") if len(raw) == size else None


def environment_block(target: Target) -> Optional[bytes]:
    """The process environment block's bytes as the dump holds them (up to its ending empty
    string), or None when the dump does not hold it."""
    bits = 64 if target.system is None or target.system.arch_name != "x86" else 32
    peb_at, params_at, env_at, size = _LAYOUTS[bits]
    for t in target.threads[:64]:
        if not t.teb:
            continue
        peb = _pointer(target, t.teb + peb_at, size)
        params = _pointer(target, peb + params_at, size) if peb else None
        env = _pointer(target, params + env_at, size) if params else None
        if not env:
            continue
        block = bytearray()
        while len(block) < MAX_ENVIRONMENT:
            chunk = target.read_available(env + len(block), _ENV_CHUNK)
            if not chunk:
                break
            block += chunk
            end = _block_end(block)
            if end is not None:
                return bytes(block[:end])
        return bytes(block) if block else None
    return None


def _block_end(block: bytearray) -> Optional[int]:
    """Where a UTF-16 environment block ends (after its double NUL), or None if not yet."""
    i = block.find(b"\0\0\0\0")
    while i >= 0:
        if i % 2 == 0:
            return i + 4
        i = block.find(b"\0\0\0\0", i + 1)
    return None


def redact_dump(data: bytes, target: Target) -> Tuple[bytes, Tuple[str, ...]]:
    """A redacted copy of the dump `target` was read from, and what was redacted (one line
    each, for the manifest and the command's output)."""
    out = bytearray(data)
    said: List[str] = []
    block = environment_block(target)  # first: it holds user names, as the original has them
    if block and len(block) > 4:
        copies = 0
        start = out.find(block)
        while start >= 0 and copies < 1024:
            out[start : start + len(block)] = bytes(len(block))
            copies += 1
            start = out.find(block, start + len(block))
        said.append(f"the environment block ({len(block)} bytes, {copies} copy(ies) in the file) zeroed")
    else:
        said.append("no environment block in the dump")
    names = user_names(target)
    replaced = _redact_names(out, names)
    if names:
        said.insert(0, f"{len(names)} user name(s) in paths, {replaced} occurrence(s), replaced by '*'")
    return bytes(out), tuple(said)
