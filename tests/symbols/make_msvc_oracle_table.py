"""Builds tests/symbols/msvc_oracle.tsv: real MSVC decorated names exported by Windows wheels,
each with what LLVM's llvm-undname makes of it (the independent oracle the demangler is
checked against), and measures dumpkit's demangler on every decorated export.

    apt-get install -y llvm-22      # llvm-undname-22; Debian's `llvm` (14) lacks auto/decltype(auto)
    pip download --no-deps --only-binary=:all: --platform win_amd64 --python-version 3.8 \\
        --implementation cp --abi cp38 tensorflow-intel==2.13.0 numpy==1.24.4 -d WHEELS
    python tests/symbols/make_msvc_oracle_table.py WHEELS/*.whl --undname llvm-undname-22 [--measure]

Rows are chosen to cover every construct (one feature pattern at a time, shortest names
first, then a seeded random pick) plus the TensorFlow entry points dumpkit cares about, then
topped up at random; the seed and the inputs fix the table. Columns: module, decorated name,
llvm-undname's output, and its output with --no-access-specifier --no-calling-convention
--no-return-type --no-member-type --no-variable-type (from which the test takes the
qualified name).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dumpkit.pe import PEImage  # noqa: E402
from dumpkit.symbols import msvc  # noqa: E402

TABLE = Path(__file__).resolve().parent / "msvc_oracle.tsv"
BARE_FLAGS = [
    "--no-access-specifier",
    "--no-calling-convention",
    "--no-return-type",
    "--no-member-type",
    "--no-variable-type",
]

ALWAYS = r"@swig@tensorflow@@"

# (what it exercises, pattern in the decorated name); each gets rows of its own
FEATURES: List[Tuple[str, str]] = [
    ("TFE_ C++ types", r"TFE_"),
    ("tensorflow::Status / absl::Status", r"VStatus@(tensorflow|lts_\d+@absl)@@"),
    ("global function", r"^\?[A-Za-z_]\w*@[\w@]*@@Y"),
    ("public member", r"@@Q[EA]A"),
    ("const member", r"@@Q[EA]B"),
    ("private member", r"@@A[EA]A"),
    ("protected member", r"@@I[EA]A"),
    ("static member", r"@@[CKS]A"),
    ("virtual member", r"@@[EMU][EA]"),
    ("constructor", r"^\?\?0"),
    ("destructor", r"^\?\?1"),
    ("template constructor", r"^\?\?\$\?0"),
    ("conversion operator", r"^\?\?B"),
    ("template conversion operator", r"^\?\?\$\?B"),
    ("operator=", r"^\?\?4"),
    ("operator==", r"^\?\?8"),
    ("operator()", r"^\?\?R"),
    ("operator[]", r"^\?\?A"),
    ("operator new/delete", r"^\?\?[23]@"),
    ("operator new[]/delete[]", r"^\?\?_[UV]"),
    ("scalar deleting dtor", r"^\?\?_G"),
    ("vftable", r"^\?\?_7"),
    ("RTTI", r"^\?\?_R"),
    ("string literal", r"^\?\?_C@"),
    ("dynamic atexit destructor", r"^\?\?__F"),
    ("local static thread guard", r"^\?\?__J"),
    ("function template", r"^\?\?\$[A-Za-z_]"),
    ("class template scope", r"@\?\$"),
    ("nested template arguments", r"\?\$\w+@V\?\$\w+@V\?\$"),
    ("integer template argument", r"\$0[A-P0-9]"),
    ("negative integer argument", r"\$0\?"),
    ("empty pack", r"\$\$V"),
    ("pack separator", r"\$\$Z"),
    ("auto non-type argument", r"\$M"),
    ("pointer template argument", r"\$1\?"),
    ("name back-reference", r"@[0-9]@"),
    ("parameter back-reference", r"@[0-9]+@Z$"),
    ("const pointer", r"QEB"),
    ("reference", r"AEA"),
    ("const reference", r"AEB"),
    ("rvalue reference", r"\$\$QEA"),
    ("const-qualified template argument", r"\$\$CB"),
    ("function pointer", r"P6A"),
    ("function type argument", r"\$\$A6"),
    ("member function pointer", r"P8"),
    ("array", r"Y0"),
    ("array type argument", r"\$\$BY"),
    ("nullptr_t", r"\$\$T"),
    ("anonymous namespace", r"\?A0x[0-9a-f]+@"),
    ("lambda", r"<lambda_"),
    ("local scope", r"\?[0-9]\?\?"),
    ("noexcept", r"_E$"),
    ("varargs", r"ZZ$"),
    ("auto return", r"\?A_P"),
    ("decltype(auto) return", r"\?A_T"),
    ("adjustor thunk", r"@@[GOW][0-9]"),
    ("static data", r"@@[0-2][^@]*$"),
    ("global data", r"@@3"),
    ("wchar_t / char16_t", r"_[WS]"),
    ("__int64 types", r"_[JK]"),
    ("bool", r"_N"),
    ("enum", r"W4"),
    ("union", r"T[A-Za-z_]\w*@"),
    ("md5 name", r"^\?\?@"),
]


# Constructs these wheels do not export (32-bit calling conventions, vtordisp thunks, noexcept,
# operator new[], RTTI locators, ...), written by hand and judged by the same oracle; rows the
# oracle rejects are left out.
SYNTHETIC: List[str] = [
    "??_U@YAPEAX_K@Z",
    "??_V@YAXPEAX@Z",
    "?f@@YAXX_E",
    "??@0123456789abcdef0123456789abcdef@",
    "??$f@$1?x@@3HA@@YAXXZ",
    "??$f@$1??g@C@@QEAAXXZ@@YAXXZ",
    "?f@@YGXH@Z",
    "?f@C@@QAEXXZ",
    "?x@@3HB",
    "?x@C@@2HA",
    "?x@C@@0PEBDEB",
    "??_7C@@6BD@@@",
    "??_R4C@@6B@",
    "??_R1A@?0A@EA@C@@8",
    "??_R2C@@8",
    "??_R3C@@8",
    "??_B?1??f@@YAXXZ@51",
    "?printf@@YAHPEBDZZ",
    "?f@@YAXP8C@@EAAXXZ@Z",
    "?f@@YAXPEQC@@H@Z",
    "?f@@YAXAEAY02H@Z",
    "?f@@YAXPEAY133H@Z",
    "?f@@YAX$$T@Z",
    "?f@@YAXPEIAH@Z",
    "?f@C@@QEIAAXXZ",
    "?f@C@@QEGBAXXZ",
    "?f@C@@QEHAAXXZ",
    "??$f@$0?0@@YAXXZ",
    "?f@@YAXW4E@@@Z",
    "?f@@YAX_W_S_U_Q@Z",
    "?f@@YA_LXZ",
    "??Bc@@QEAAHXZ",
    "?f@?A0x12345678@@YAXXZ",
    "??__Ex@@YAXXZ",
    "??__Fx@@YAXXZ",
    "??_C@_17ABCDEFGH@?$AAa?$AAb?$AAc?$AA?$AA@",
    "??_C@_0M@ABCDEFGH@hello?5world?$AA@",
    "?f@@YAXP6AHH@Z@Z",
    "?f@@YAP6AHH@ZXZ",
    "?x@@3P6AHH@ZEA",
    "?f@C@@UEAAXXZ",
    "?f@C@@MEAAXXZ",
    "?f@C@@EEAAXXZ",
    "?f@C@@CAXXZ",
    "?f@C@@KAXXZ",
    "?f@C@@$4PPPPPPPM@A@EAAXXZ",
    "?f@@YAXPEFAH@Z",
    "?f@@YIXH@Z",
    "?f@@YQXH@Z",
    "?f@@YMXH@Z",
    "?f@@YAXPECH@Z",
    "?f@@YAXPEDH@Z",
    "?f@@YAXRECH@Z",
    "?f@@YAXSEDH@Z",
    "??$f@$$A6AXXZ@@YAXXZ",
    "??$f@$$BY01H@@YAXXZ",
    "??$f@$F0A@@@YAXXZ",
    "??$f@$E?x@@3HA@@YAXXZ",
    "??$f@$H??g@C@@QEAAXXZA@@@YAXXZ",
    "?f@@YAX?AH@Z",
    "??$f@?0@@YAXXZ",
    "?f@@YAXTU@@@Z",
    "?f@@YAXUS@@@Z",
    "?f@@YA?BHXZ",
    "??0?$C@H@@QEAA@XZ",
    "??1?$C@H@@QEAA@XZ",
    "??$?0H@?$C@H@@QEAA@H@Z",
    "??_DC@@QEAAXXZ",
    "??_EC@@UEAAPEAXI@Z",
    "??__K_x@@YAXXZ",
    "??__L@YAXXZ",
    "??__M@YAXXZ",
    "??$?8H@?$C@H@@QEBA_NAEBV0@@Z",
    "?f@@YAXPEAPEAPEAPEAH@Z",
    "?f@C@@$R4A@B@C@D@EAAXXZ",
]


def pe_members(paths: Iterable[str]) -> Iterable[Tuple[str, str]]:
    """(module name, file path) of every .pyd/.dll in the given wheels or folders."""
    for path in paths:
        if os.path.isdir(path):
            for dirpath, _, files in os.walk(path):
                for f in sorted(files):
                    if f.lower().endswith((".pyd", ".dll")):
                        yield f, os.path.join(dirpath, f)
            continue
        with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory() as tmp:
            for info in z.infolist():
                if info.filename.lower().endswith((".pyd", ".dll")):
                    yield os.path.basename(info.filename), z.extract(info, tmp)


def decorated_exports(paths: Iterable[str]) -> Dict[str, str]:
    """Decorated export name -> the first module exporting it."""
    names: Dict[str, str] = {}
    for module, file in pe_members(paths):
        img = PEImage.from_file(file)
        try:
            for _, name in img.exports():
                if name.startswith("?"):
                    names.setdefault(name, module)
        finally:
            img.close()
    return names


def undname(tool: str, names: List[str], flags: Optional[List[str]] = None) -> Dict[str, Optional[str]]:
    """llvm-undname echoes each input line, then its demangling (absent if it failed), then a
    blank line."""
    out = subprocess.run(
        [tool, *(flags or [])], input="\n".join(names) + "\n", capture_output=True, text=True, check=False
    ).stdout
    result: Dict[str, Optional[str]] = {}
    for block in out.split("\n\n"):
        lines = block.strip("\n").split("\n")
        if lines and lines[0]:
            result[lines[0]] = lines[1] if len(lines) > 1 else None
    missing = [n for n in names if n not in result]
    if missing:
        raise SystemExit(f"{tool}: no answer for {len(missing)} names, e.g. {missing[0]}")
    return result


def choose(names: List[str], per_feature: int, total: int, seed: int) -> List[str]:
    rng = random.Random(seed)
    ordered = sorted(names, key=lambda n: (len(n), n))
    # every tensorflow::swig entry point (tf.nest.flatten's Flatten among them): dumpkit maps them
    chosen: Dict[str, None] = {n: None for n in ordered if re.search(ALWAYS, n)}
    for _, pattern in FEATURES:
        rx = re.compile(pattern)
        hits = [n for n in ordered if rx.search(n)]
        picks = hits[: per_feature // 2]
        rest = [n for n in hits[per_feature // 2 :] if len(n) <= 600]
        picks += rng.sample(rest, min(len(rest), per_feature - len(picks)))
        for n in picks:
            chosen[n] = None
    pool = [n for n in ordered if n not in chosen and len(n) <= 600]
    for n in rng.sample(pool, max(0, min(len(pool), total - len(chosen)))):
        chosen[n] = None
    return sorted(chosen, key=lambda n: (len(n), n))


def measure(names: List[str], oracle: Dict[str, Optional[str]]) -> None:
    start = time.perf_counter()
    results = {n: msvc.parse(n) for n in names}
    elapsed = time.perf_counter() - start
    texts = {n: (r[1] if r is not None else None) for n, r in results.items()}
    unread = [n for n in names if texts[n] is None]
    differ = [n for n in names if texts[n] is not None and texts[n] != oracle[n]]
    same = len(names) - len(unread) - len(differ)
    print(
        f"{len(names)} decorated exports: {same} demangled identically to the oracle, {len(differ)} differently, {len(unread)} not read"
    )
    print(f"speed: {len(names) / elapsed:,.0f} names/s ({elapsed:.1f} s)")
    for n in differ[:20] + unread[:20]:
        print(f"  {n}\n    oracle: {oracle[n]}\n    dumpkit: {results[n]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", help="wheels (.whl) or folders holding .pyd/.dll files")
    ap.add_argument("--undname", default="llvm-undname-22")
    ap.add_argument("--out", default=str(TABLE))
    ap.add_argument("--per-feature", type=int, default=4)
    ap.add_argument("--total", type=int, default=320)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--measure", action="store_true", help="also compare every decorated export and time it")
    args = ap.parse_args()

    exports = decorated_exports(args.inputs)
    names = sorted(exports)
    full = undname(args.undname, names)
    bare = undname(args.undname, names, BARE_FLAGS)
    version = subprocess.run([args.undname, "--version"], capture_output=True, text=True).stdout.split("\n")
    version_line = next((v.strip() for v in version if "version" in v.lower()), args.undname)
    if args.measure:
        measure(names, full)

    rows = choose([n for n in names if full[n] is not None], args.per_feature, args.total, args.seed)
    syn_full = undname(args.undname, SYNTHETIC)
    syn_bare = undname(args.undname, SYNTHETIC, BARE_FLAGS)
    synthetic = [n for n in SYNTHETIC if syn_full[n] is not None and n not in exports]
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(
            f"# {len(rows)} of {len(names)} decorated exports of {', '.join(os.path.basename(p) for p in args.inputs)}\n"
        )
        f.write(f"# oracle: {args.undname} ({version_line}); written by tests/symbols/make_msvc_oracle_table.py\n")
        f.write("# module\tdecorated\tllvm-undname\tllvm-undname " + " ".join(BARE_FLAGS) + "\n")
        for n in rows:
            f.write(f"{exports[n]}\t{n}\t{full[n]}\t{bare[n]}\n")
        for n in synthetic:
            f.write(f"(synthetic)\t{n}\t{syn_full[n]}\t{syn_bare[n]}\n")
    print(f"wrote {len(rows)} + {len(synthetic)} synthetic rows to {args.out}")


if __name__ == "__main__":
    main()
