#!/bin/bash
# Rebuild every sample dump in this folder from scratch, on Linux.
#
# Needs (Debian 12):
#   apt-get install -y --no-install-recommends gcc-mingw-w64-x86-64 \
#       g++-mingw-w64-x86-64 binutils-mingw-w64-x86-64 wine64 xz-utils python3
# Used for the committed dumps: mingw-w64 10.0.0-3 with x86_64-w64-mingw32-gcc
# 12.2.0 (win32 thread model), Wine 8.0 (Debian 8.0~repack-4).
#
# Steps: compile src/ into bin/ with mingw (static), run every scenario under
# Wine as  dumper.exe OUT.dmp tfhost.exe SCENARIO  (gp_* scenarios: simdhost.exe,
# which loads simdkernels.dll; dumper.exe is an out-of-process debugger that
# calls dbghelp!MiniDumpWriteDump, MiniDumpNormal, on the first-chance fatal
# exception), then write the normalised copy, xz the big dump and regenerate
# manifest.json (src/dumpfacts.py).
#
# Usage: ./build.sh [--no-compile] [SCENARIO...]
# Every Wine call runs under `timeout`: Wine can hang.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
. src/wine_env.sh
CC=x86_64-w64-mingw32-gcc
WINDRES=x86_64-w64-mingw32-windres
CFLAGS="-O2 -fno-inline -fno-optimize-sibling-calls -g0 -Wall -Wno-infinite-recursion"
LDFLAGS="-static -static-libgcc"

compile=1
if [ "${1:-}" = "--no-compile" ]; then compile=0; shift; fi
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(recursion_one recursion_cycle3 big_frame tree_free fastfail_abort fastfail_gs
             heap_oob null_deref illegal_instruction tf_env_abort deep_recursion_1m
             gp_misaligned_sse gp_wild_pointer)
fi

if [ $compile = 1 ]; then
  rm -rf bin && mkdir -p bin
  timeout 120 $CC $CFLAGS -shared $LDFLAGS -o bin/opkernels.dll src/opkernels.c
  timeout 120 $CC $CFLAGS $LDFLAGS -o bin/tfhost.exe src/tfhost.c -ldbghelp
  timeout 120 $CC $CFLAGS $LDFLAGS -o bin/dumper.exe src/dumper.c -ldbghelp
  # the #GP access violations (gp_* scenarios) have their own host and kernel DLL
  timeout 120 $CC $CFLAGS -shared $LDFLAGS -o bin/simdkernels.dll src/simdkernels.c
  timeout 120 $CC $CFLAGS $LDFLAGS -o bin/simdhost.exe src/simdhost.c
  # environment stand-ins, each with its own VERSIONINFO resource
  PY=bin/env/Python310
  CU="bin/env/NVIDIA GPU Computing Toolkit/CUDA/v11.2/bin"
  TF=$PY/Lib/site-packages/tensorflow/python
  mkdir -p "$PY" "$CU" "$TF" bin/env/Windows/System32
  build_standin() { # rc-name output-path [extra cflags]
    timeout 60 $WINDRES src/$1.rc -O coff -o /tmp/dumpkit_$1.res
    timeout 120 $CC $CFLAGS ${3:-} -shared $LDFLAGS -o "$2" src/standin.c /tmp/dumpkit_$1.res
    rm -f /tmp/dumpkit_$1.res
  }
  build_standin python310 "$PY/python310.dll"
  build_standin cudart64_110 "$CU/cudart64_110.dll"
  build_standin cublas64_11 "$CU/cublas64_11.dll"
  build_standin cudnn64_8 "$CU/cudnn64_8.dll"
  build_standin nvcuda bin/env/Windows/System32/nvcuda.dll
  build_standin pywrap "$TF/_pywrap_tensorflow_internal.pyd" -DPYWRAP
fi

wine_prefix_ready

cd "$HERE/bin"
for s in "${scenarios[@]}"; do
  out="$HERE/$s.dmp"
  rm -f "$out" "$out.xz"
  host=tfhost.exe
  case $s in gp_*) host=simdhost.exe;; esac
  echo "== $s ($host)"
  timeout 300 $WINE dumper.exe "Z:${out//\//\\}" "$host" "$s"
  test -s "$out"
done
# the in-process variant for comparison: vectored handler + watchdog thread in
# tfhost itself (ClientPointers=TRUE); works for stack overflow, not for fail-fast
case " ${scenarios[*]} " in *" recursion_one "*)
  echo "== recursion_one (in-process self-dump)"
  rm -f "$HERE/recursion_one.selfdump.dmp" "$HERE/recursion_one.selfdump.dmp.xz"
  timeout 120 $WINE tfhost.exe recursion_one --self-dump "Z:${HERE//\//\\}\\recursion_one.selfdump.dmp" || true
  test -s "$HERE/recursion_one.selfdump.dmp";;
esac
cd "$HERE"
timeout 60 /usr/lib/wine/wineserver -k 2>/dev/null || true

# a normalised copy for tests: Wine's 0xfff0 stream retyped to UnusedStream (0)
# and its data zeroed; everything else byte-identical.
if [ -f recursion_one.dmp ]; then
  timeout 60 python3 src/normalize_dump.py recursion_one.dmp recursion_one.normalized.dmp
fi
# dumps larger than 2 MB are stored xz-compressed
for f in *.dmp; do
  if [ "$(stat -c %s "$f")" -gt 2000000 ]; then
    timeout 600 xz -9 -T2 -f "$f"
  fi
done
# Wine's own ntdll/kernel32/kernelbase, the images every thread's bottom frames and the
# waiting threads' WaitForSingleObject need (unmodified: stripping would change
# TimeDateStamp/SizeOfImage); dumpkit reads NAME.dll.xz directly.
mkdir -p bin/wine
for n in ntdll kernel32 kernelbase; do
  timeout 300 xz -9e -c "/usr/lib/x86_64-linux-gnu/wine/x86_64-windows/$n.dll" > "bin/wine/$n.dll.xz"
done
# facts (true call chains, frame sizes, ...) -> manifest.json
timeout 900 python3 src/dumpfacts.py --manifest manifest.json --readme README.md
# The python310.dll stand-in is only for the program to load while it crashes: the analysis
# takes its version from the dump's module list, and a file named like python.org's
# interpreter is not kept beside the dumps (the real ones stay in ../shared/winpython).
rm -f bin/env/Python310/python310.dll
ls -la
du -sh .
