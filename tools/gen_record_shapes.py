#!/usr/bin/env python3
"""Regenerate dumpkit/record_shapes.py: the `__init__` of every shape of record dumpkit defines
(dumpkit/records.py), written out so that Python's bytecode cache holds them and defining the
records compiles nothing at start-up.

Usage: python3 tools/gen_record_shapes.py            (rewrites the file)
       python3 tools/gen_record_shapes.py --check    (exit 1 when the file is not current)

Every dumpkit module that imports here is walked; a record only defined on Windows (capture's
Win32 modules) still works without its shape written: records.py compiles a missing one."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys
from typing import Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "dumpkit", "record_shapes.py")
sys.path.insert(0, ROOT)

import dumpkit  # noqa: E402
from dumpkit.records import shape_of, shape_source  # noqa: E402

HEADER = '''"""The `__init__` of each shape of record dumpkit defines (dumpkit/records.py): written by
tools/gen_record_shapes.py, not by hand. Field i's name is the constant "\\\\0i" and its default or
factory the global `_d_i` or `_f_i`; records.py renames each code object for its record and
runs it over that record's globals, so the names below are undefined here."""

# ruff: noqa
# mypy: ignore-errors

'''


def dumpkit_shapes() -> Set[Tuple[str, bool]]:
    shapes: Set[Tuple[str, bool]] = set()
    for info in pkgutil.walk_packages(dumpkit.__path__, "dumpkit."):
        if info.name == "dumpkit.__main__":
            continue  # runs the command line
        try:
            module = importlib.import_module(info.name)
        except Exception:  # a Windows-only module
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and value.__dict__.get("__dumpkit_record__") and "__init__" in value.__dict__:
                if value.__init__.__code__.co_filename.startswith("<record "):
                    shapes.add(shape_of(value))
    return shapes


def render(shapes: Set[Tuple[str, bool]]) -> str:
    ordered = sorted(shapes)
    parts = [HEADER]
    for n, (kinds, post_init) in enumerate(ordered):
        parts.append(("\n\n" if n else "\n") + shape_source(kinds, post_init, f"_{n}"))
    parts.append("\n\nSHAPES = {\n")
    for n, shape in enumerate(ordered):
        parts.append(f'    ("{shape[0]}", {shape[1]}): _{n},\n')
    parts.append("}\n")
    return "".join(parts)


def main() -> int:
    text = render(dumpkit_shapes())
    if sys.argv[1:] == ["--check"]:
        with open(TARGET, encoding="utf-8") as f:
            current = f.read()
        if current != text:
            print(f"{TARGET} is not current: run python3 tools/gen_record_shapes.py")
            return 1
        return 0
    with open(TARGET, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
