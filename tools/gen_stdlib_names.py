#!/usr/bin/env python3
"""Regenerate dumpkit/analysis/stdlib_names.py: the standard library's top-level module names
(sys.stdlib_module_names, Python 3.10+; run it with the newest CPython at hand), which tell a
relative filename of the standard library ("threading.py", "json\\encoder.py", as the
embeddable distributions' precompiled zip records them) from the user's own code.

Usage: python3 tools/gen_stdlib_names.py > dumpkit/analysis/stdlib_names.py"""

import sys

names = sorted(n for n in sys.stdlib_module_names if not n.startswith("_"))
print('"""The standard library\'s top-level module names, from sys.stdlib_module_names of CPython')
print(
    f'{sys.version_info[0]}.{sys.version_info[1]} (tools/gen_stdlib_names.py writes this file; private modules left out)."""'
)
print()
print("STDLIB_NAMES = frozenset(")
print("    (")
for n in names:
    print(f'        "{n}",')
print("    )")
print(")")
