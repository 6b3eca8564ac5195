#!/bin/bash
# Rebuild the real dumps of hung Python processes (python.org's CPython 3.8-3.13 under Wine).
#
# Needs (Debian 12):
#   apt-get install -y --no-install-recommends wine64 gcc-mingw-w64-x86-64 xz-utils python3
#   ../../../shared/winpython/cpython-3.X-amd64  (python.org's builds, see its README)
#   the capture lane (tests/capture_lane/lane.py: its Wine prefix and its scratch copies of
#     those CPythons with dumpkit's Windows dependencies; built on first use, see
#     tests/support/wine) and the repository's venv to drive it ($PYTHON)
#   ../python/src/trim_full.py                   (drops Wine's DLL images from full dumps)
# Used for the committed files: Wine 8.0 (Debian 8.0~repack-4), x86_64-w64-mingw32-gcc 12.
#
# What it does:
#   1. builds bin/storage.dll from src/storage.c if missing (or REBUILD_DLL=1; the committed
#      DLL is the one the dumps loaded) and $HANGS_CACHE/dumpnow.exe from src/dumpnow.c;
#   2. copies src/*.py and storage.dll to $HANGS_CACHE/scripts (Z:\work\cache-hangs\scripts as
#      the programs see it) and makes a Wine prefix of its own for the plain-tool dumps;
#   3. runs every scenario, one at a time, with src/take_dumps.py: the script under the
#      interpreter (stdin /dev/null, stdout and stderr two pipes, as python.exe needs), and a
#      second after its MARKER line (the ground truth: threads, what each waits on, who holds
#      it) a MiniDumpNormal dump, then a full-memory one, of the running process, which must
#      still run after each; then it is killed. Tools:
#        capture  `dumpkit capture --attach PID --now [--full]`, in the capture lane's prefix,
#                 run by the same Windows CPython (the Python-aware dump: Python stacks'
#                 memory, command line, what the threads' stacks point to)
#        dumpnow  dumpnow.exe PID OUT normal|full, in our own prefix: MiniDumpWriteDump alone
#      keeping what the program printed and what each tool said in logs/NAME.log;
#   4. keeps every dump as written in $HANGS_CACHE/raw-dumps (full-memory ones in
#      $HANGS_CACHE/full-dumps); commits full-memory dumps trimmed of Wine's own DLL images
#      (../python/src/trim_full.py); every committed dump is xz -9 compressed;
#   5. regenerates manifest.json with src/facts.py (its own minidump reader, not dumpkit).
#
# Usage: ./build.sh [NAME...]      (default: every run; a named one is remade alone)
# Environment: HANGS_CACHE (default cache-hangs beside the repository), PYTHON (default the repo's .venv),
# WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
TRIM=$REPO/sample_dumps/python/src/trim_full.py
CACHE=${HANGS_CACHE:-$(dirname "$REPO")/cache-hangs}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
WINE=${WINE:-/usr/lib/wine/wine64}
export WINEDEBUG=-all
PREFIX=$CACHE/wineprefix  # ours, for dumpnow: the capture lane's prefix is the lane's
WINE_DLLS=/usr/lib/x86_64-linux-gnu/wine/x86_64-windows

# run | python | tool | script | full (yes: also a full-memory dump)
# A run writes NAME.dmp (MiniDumpNormal) and, with full, NAME_full (NAME with _full before _py).
RUNS="
lock_deadlock_py38|3.8|capture|lock_deadlock|no
lock_deadlock_py311|3.11|capture|lock_deadlock|yes
lock_deadlock_py312|3.12|capture|lock_deadlock|yes
lock_deadlock_py313|3.13|capture|lock_deadlock|no
gil_held_py38|3.8|capture|gil_held|yes
gil_held_py311|3.11|capture|gil_held|yes
gil_held_py312|3.12|capture|gil_held|yes
gil_held_py313|3.13|capture|gil_held|yes
queue_wait_py311|3.11|capture|queue_wait|yes
queue_wait_py312|3.12|capture|queue_wait|yes
cs_deadlock_py311|3.11|capture|cs_deadlock|yes
cs_deadlock_py312|3.12|capture|cs_deadlock|yes
lock_deadlock_plain_py312|3.12|dumpnow|lock_deadlock|yes
cs_deadlock_plain_py311|3.11|dumpnow|cs_deadlock|no
"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  mapfile -t wanted < <(echo "$RUNS" | awk -F'|' 'NF>1{print $1}')
fi
for s in "${wanted[@]}"; do
  grep -q "^$s|" <<<"$RUNS" || { echo "unknown run: $s" >&2; exit 2; }
done
test -f "$TRIM" || { echo "missing $TRIM" >&2; exit 2; }
test -x "$PYTHON" || { echo "missing $PYTHON (the repository's venv: see README.md)" >&2; exit 2; }
start=$(date +%s)
mkdir -p "$CACHE"/{scripts,raw-dumps,full-dumps} logs bin

# 1. the DLL the scenario loads (committed), and the plain dumper (cache only)
if [ ! -f bin/storage.dll ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared -nostdlib -e DllMain \
    -o bin/storage.dll src/storage.c -lkernel32
fi
x86_64-w64-mingw32-gcc -O2 -g0 -static -o "$CACHE/dumpnow.exe" src/dumpnow.c -ldbghelp

# 2. the scripts where the programs find them, and our own prefix
cp src/lock_deadlock.py src/gil_held.py src/queue_wait.py src/cs_deadlock.py bin/storage.dll "$CACHE/scripts/"
if [ ! -f "$PREFIX/system.reg" ]; then
  WINEPREFIX=$PREFIX timeout 300 "$WINE" wineboot -i </dev/null 2>&1 | cat || true
fi

# 3-4. the runs
for s in "${wanted[@]}"; do
  IFS='|' read -r name python tool script full <<<"$(grep "^$s|" <<<"$RUNS")"
  full_name=${name/_py/_full_py}
  rm -f "$name.dmp.xz" "$full_name.trimmed.dmp.xz"
  opts=(--normal "$CACHE/raw-dumps/$name.dmp")
  [ "$full" = yes ] && opts+=(--full "$CACHE/full-dumps/$full_name.dmp")
  [ "$tool" = dumpnow ] && opts+=(--dumpnow "$CACHE/dumpnow.exe" --prefix "$PREFIX")
  echo "== $name ($tool, CPython $python, src/$script.py)"
  timeout 1800 "$PYTHON" src/take_dumps.py --tool "$tool" --python "$python" \
    --script "$CACHE/scripts/$script.py" --log "logs/$name.log" "${opts[@]}"
  cp "$CACHE/raw-dumps/$name.dmp" "$name.dmp"
  stat -c "raw_bytes $name.dmp %s" "$name.dmp" >> "logs/$name.log"
  timeout 1200 xz -9 -T2 -f "$name.dmp"
  if [ "$full" = yes ]; then
    # 75-80 MB raw, most of it Wine's own DLL images: the raw dump stays in the cache
    stat -c "raw_full_bytes $full_name.dmp %s" "$CACHE/full-dumps/$full_name.dmp" >> "logs/$name.log"
    python3 "$TRIM" "$CACHE/full-dumps/$full_name.dmp" "$full_name.trimmed.dmp" \
      | sed "s/^/trim_full $full_name.dmp /" >> "logs/$name.log"
    timeout 1200 xz -9 -T2 -f "$full_name.trimmed.dmp"
  fi
  ls -la "$name.dmp.xz"
  if [ "$full" = yes ]; then ls -la "$full_name.trimmed.dmp.xz"; fi
done

# 5. the manifest
timeout 900 python3 src/facts.py --logs logs --raw-dumps "$CACHE/raw-dumps" --full-dumps "$CACHE/full-dumps" \
  --wine-dlls "$WINE_DLLS" --manifest manifest.json .
echo "build.sh: $(( $(date +%s) - start )) s"
du -sh .
