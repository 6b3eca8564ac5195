"""The real PDBs that sample_dumps/build_pdb.sh made with clang + lld (mingw target), and a
way to make a copy of one that belongs to another build (GUID or age changed in its info
stream, nothing else)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Optional

from dumpkit.symbols.pdb.msf import MSF_MAGIC

from tests.support.samples import sample_path


def pdb_path(name: str) -> Path:
    return sample_path(f"bin/pdb/{name}")


def info_stream_offset(data: bytes) -> int:
    """File offset of the info stream (stream 1), which is shorter than a block."""
    block_size, _, _, dir_bytes, _, map_block = struct.unpack_from("<6I", data, len(MSF_MAGIC))
    (dir_block,) = struct.unpack_from("<I", data, map_block * block_size)  # small PDB: one directory block
    directory = data[dir_block * block_size : dir_block * block_size + dir_bytes]
    (count,) = struct.unpack_from("<I", directory, 0)
    sizes = struct.unpack_from(f"<{count}I", directory, 4)
    stream0_blocks = -(-sizes[0] // block_size) if sizes[0] != 0xFFFFFFFF else 0
    (first,) = struct.unpack_from("<I", directory, 4 + 4 * count + 4 * stream0_blocks)
    return first * block_size


def other_build(src: Path, dest: Path, age: Optional[int] = None, guid_byte: Optional[int] = None) -> Path:
    """A copy of `src` whose info stream says another age, or another GUID (its first byte
    replaced): what a PDB of a rebuild looks like to a matcher."""
    data = bytearray(src.read_bytes())
    at = info_stream_offset(bytes(data))
    if age is not None:
        struct.pack_into("<I", data, at + 8, age)
    if guid_byte is not None:
        data[at + 12] = guid_byte
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(bytes(data))
    return dest


def copy_tree(names, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copy(pdb_path(n), dest / n)
    return dest
