#!/bin/bash
# Rebuild the real crash dumps of python.org's CPython 3.9-3.13 (x64) in this folder.
#
# Needs (Debian 12):
#   apt-get install -y --no-install-recommends wine64 gcc-mingw-w64-x86-64 xz-utils python3
#   ../../../shared/winpython/cpython-3.X-amd64   (python.org's embeddable builds, see its README)
#   ../bin/dumper.exe                             (the project's out-of-process dumper)
#   ../python/src/trim_full.py                    (drops Wine's DLL images from full dumps)
# Used for the committed files: Wine 8.0 (Debian 8.0~repack-4), x86_64-w64-mingw32-gcc 12.
#
# What it does:
#   1. builds bin/nativelib.dll from src/nativelib.c if it is missing (or REBUILD_DLL=1; the
#      committed DLL is the one the dumps were made with) and checks with objdump that
#      walk_tree and visit_node really CALL each other (no loop, no tail jump);
#   2. makes a scratch copy of each interpreter under $PYVER_CACHE/images/Python3X (the
#      shared folders are read-only and stay untouched) and links it into a Wine prefix of
#      its own as C:\Python3X; src/*.py and nativelib.dll go to C:\scripts;
#   3. runs every scenario (one at a time, under `timeout`) as
#        dumper.exe OUT.dmp [--full] C:\Python3X\python.exe C:\scripts\SCRIPT.py [ARGS]
#      keeping what the program and the dumper printed in logs/NAME.log (the program's
#      MARKER line is the ground truth); "check" scenarios are expected NOT to crash
#      (3.11+ / 3.12+ stop the recursion themselves): their log is kept, no dump;
#   4. keeps full-memory dumps in $PYVER_CACHE/full-dumps and commits them trimmed of Wine's
#      own DLL images (../python/src/trim_full.py), xz -9 compresses every dump over 2 MB;
#   5. regenerates manifest.json with src/facts.py (its own minidump reader, not dumpkit).
#
# Usage: ./build.sh [NAME...]      (default: every scenario; a named one is remade alone)
# Environment: PYVER_CACHE (default /work/pyver-cache), WINEPREFIX (default
# $PYVER_CACHE/wineprefix), WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
SHARED=$REPO/../shared/winpython
DUMPER=$REPO/sample_dumps/bin/dumper.exe
TRIM=$REPO/sample_dumps/python/src/trim_full.py
CACHE=${PYVER_CACHE:-/work/pyver-cache}
export WINEPREFIX=${WINEPREFIX:-$CACHE/wineprefix}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}
WINESERVER=${WINE%wine64}wineserver

# name | python | dump type (normal | full | check = must not crash) | script | arguments
# (the full-memory recursion dumps build a shorter chain: the stack runs out long before,
# and a million nodes would only make the heap in the dump bigger)
SCENARIOS="
ctypes_recursion_py39|39|normal|ctypes_recursion|
ctypes_recursion_py310|310|normal|ctypes_recursion|
ctypes_recursion_py311|311|normal|ctypes_recursion|
ctypes_recursion_py312|312|normal|ctypes_recursion|
ctypes_recursion_py313|313|normal|ctypes_recursion|
ctypes_recursion_full_py39|39|full|ctypes_recursion|
ctypes_recursion_full_py310|310|full|ctypes_recursion|
ctypes_recursion_full_py311|311|full|ctypes_recursion|
ctypes_recursion_full_py312|312|full|ctypes_recursion|
ctypes_recursion_full_py313|313|full|ctypes_recursion|
thread_av_py39|39|full|thread_av|
thread_av_py310|310|full|thread_av|
thread_av_py311|311|full|thread_av|
thread_av_py312|312|full|thread_av|
thread_av_py313|313|full|thread_av|
repr_recursion_py39|39|normal|repr_recursion|
repr_recursion_py310|310|normal|repr_recursion|
repr_recursion_py311|311|normal|repr_recursion|
repr_recursion_py312|312|check|repr_recursion|
repr_recursion_py313|313|check|repr_recursion|
py_recursion_py39|39|normal|py_recursion|
py_recursion_py310|310|normal|py_recursion|
py_recursion_py311|311|check|py_recursion|
slot_recursion_py39|39|normal|slot_recursion|
slot_recursion_py310|310|normal|slot_recursion|
slot_recursion_py311|311|normal|slot_recursion|
slot_recursion_py312|312|check|slot_recursion|
slot_recursion_py313|313|check|slot_recursion|
getitem_recursion_py39|39|normal|getitem_recursion|
getitem_recursion_py310|310|normal|getitem_recursion|
getitem_recursion_py311|311|check|getitem_recursion|
py_recursion_full_py39|39|full|py_recursion|10000
py_recursion_full_py310|310|full|py_recursion|10000
slot_recursion_full_py311|311|full|slot_recursion|10000
repr_recursion_full_py311|311|full|repr_recursion|100000
"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  mapfile -t wanted < <(echo "$SCENARIOS" | awk -F'|' 'NF>1{print $1}')
fi
for s in "${wanted[@]}"; do
  echo "$SCENARIOS" | grep -q "^$s|" || { echo "unknown scenario: $s" >&2; exit 2; }
done
test -f "$DUMPER" || { echo "missing $DUMPER (build ../build.sh first)" >&2; exit 2; }
test -f "$TRIM" || { echo "missing $TRIM" >&2; exit 2; }
start=$(date +%s)

# 1. the native library (committed; rebuilt only when missing or asked for)
if [ ! -f bin/nativelib.dll ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  mkdir -p bin
  x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared -static-libgcc \
    -o bin/nativelib.dll src/nativelib.c
fi
disasm=$(x86_64-w64-mingw32-objdump -d bin/nativelib.dll)
for pair in walk_tree:visit_node visit_node:walk_tree; do
  caller=${pair%%:*} callee=${pair##*:}
  echo "$disasm" | awk "/<$caller>:/,/^\$/" | grep -q "call .*<$callee>" \
    || { echo "nativelib.dll: $caller does not CALL $callee" >&2; exit 1; }
done

# 2. scratch interpreters and the Wine prefix
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  timeout 300 "$WINE" wineboot -i >/dev/null 2>&1 || true
fi
C=$WINEPREFIX/drive_c
mkdir -p "$C/scripts" "$CACHE/images"
for v in 39 310 311 312 313; do
  src=$SHARED/cpython-${v:0:1}.${v:1}-amd64
  dir=$CACHE/images/Python$v
  test -f "$src/python$v.dll" || { echo "missing $src" >&2; exit 2; }
  if [ ! -f "$dir/.copied" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    cp -r "$src/." "$dir/" && chmod -R u+w "$dir"
    touch "$dir/.copied"
  fi
  ln -sfn "$dir" "$C/Python$v"
done
cp src/*.py bin/nativelib.dll "$C/scripts/"

# 3. the scenarios
mkdir -p logs "$CACHE/full-dumps"
for s in "${wanted[@]}"; do
  IFS='|' read -r name ver kind script args <<<"$(echo "$SCENARIOS" | grep "^$s|")"
  out="$HERE/$name.dmp"
  rm -f "$out" "$out.xz" "$HERE/$name.trimmed.dmp" "$HERE/$name.trimmed.dmp.xz"
  full=()
  [ "$kind" = full ] && full=(--full)
  echo "== $name ($kind, C:\\Python$ver\\python.exe C:\\scripts\\$script.py $args)"
  t0=$(date +%s.%N)
  # stdin /dev/null and stdout a pipe: python.exe dies in init_sys_streams otherwise
  # shellcheck disable=SC2086
  (cd "$C/scripts" && timeout 900 "$WINE" "$DUMPER" "Z:${out//\//\\}" "${full[@]}" \
     "C:\\Python$ver\\python.exe" "C:\\scripts\\$script.py" $args </dev/null 2>&1 | cat) \
     > "logs/$name.log" || true
  t1=$(date +%s.%N)
  echo "elapsed_seconds $(python3 -c "print(round($t1 - $t0, 1))")" >> "logs/$name.log"
  cat "logs/$name.log"
  timeout 60 "$WINESERVER" -k 2>/dev/null || true
  if [ "$kind" = check ]; then
    if [ -s "$out" ]; then echo "$name was expected not to crash, but a dump was written" >&2; exit 1; fi
    rm -f "$out"
    continue
  fi
  test -s "$out" || { echo "no dump for $name" >&2; exit 1; }
  if [ "$kind" = full ]; then
    # 55-80 MB raw, most of it Wine's own DLL images: the raw dump stays in the cache
    mv "$out" "$CACHE/full-dumps/$name.dmp"
    stat -c 'raw_full_bytes %s' "$CACHE/full-dumps/$name.dmp" >> "logs/$name.log"
    out="$HERE/$name.trimmed.dmp"
    python3 "$TRIM" "$CACHE/full-dumps/$name.dmp" "$out" | sed 's/^/trim_full /' | tee -a "logs/$name.log"
  fi
  # 4. compress what is over 2 MB
  stat -c 'raw_bytes %s' "$out" >> "logs/$name.log"
  if [ "$(stat -c %s "$out")" -gt 2000000 ]; then
    t0=$(date +%s.%N)
    timeout 1200 xz -9 -T2 -f "$out"
    t1=$(date +%s.%N)
    echo "xz_seconds $(python3 -c "print(round($t1 - $t0, 1))") xz_bytes $(stat -c %s "$out.xz")" >> "logs/$name.log"
  fi
done

# 5. the manifest
timeout 900 python3 src/facts.py --logs logs --full-dumps "$CACHE/full-dumps" \
  --images "$CACHE/images" --manifest manifest.json .
echo "build.sh: $(( $(date +%s) - start )) s"
ls -la
du -sh .
