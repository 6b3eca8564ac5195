#!/bin/bash
# Rebuild the real dumps of Python processes that end themselves (python.org's CPython 3.8-3.13).
#
# Needs (Debian 12):
#   apt-get install -y --no-install-recommends wine64 gcc-mingw-w64-x86-64 xz-utils python3
#   ../../../shared/winpython/cpython-3.X-amd64   (python.org's builds, see its README)
#   ../bin/dumper.exe                             (the project's out-of-process dumper, --on-exit)
#   ../python/src/trim_full.py                    (drops Wine's DLL images from full dumps)
# Used for the committed files: Wine 8.0 (Debian 8.0~repack-4), x86_64-w64-mingw32-gcc 12.
#
# What it does:
#   1. builds bin/assertlib.dll, bin/oldext.dll, bin/gpuext.pyd and bin/cudart64_110.dll from
#      src/ if missing (or REBUILD_DLL=1; the committed DLLs are the ones the dumps loaded);
#      oldext.dll's import library of python39.dll is made from src/python39.def with dlltool,
#      in the cache, as are gpuext.pyd's: python3.dll's (src/python3.def) and the two
#      delay-import libraries of cudnn64_8.dll and cudart64_110.dll (dlltool -y, from
#      src/cudnn64_8.def, src/cudart64_110.def); src/set_delay_dir.py then fills in the
#      Delay Import Directory entry GNU ld leaves zero;
#   2. makes a scratch copy of each interpreter under $ENDINGS_CACHE/images/Python3X (the shared
#      folders stay untouched) and links it into a Wine prefix of its own as C:\Python3X; the
#      broken installations of fatal_startup are copies without python3X.zip, linked as
#      C:\AppPython3X; src/*.py and assertlib.dll go to C:\scripts, oldext.dll and a copy of
#      python39.dll to C:\scripts\oldext, gpuext.pyd to C:\scripts\gpu, the stand-in
#      cudart64_110.dll (CUDA 11.0) to C:\Program Files\NVIDIA GPU Computing
#      Toolkit\CUDA\v11.0\bin (delayload_proc puts it on PATH); no cudnn64_8.dll anywhere;
#   3. runs every scenario (one at a time, under `timeout`, stdin /dev/null, stdout and stderr
#      two pipes) as
#        dumper.exe OUT.dmp --on-exit [--full] C:\Python3X\python.exe C:\scripts\SCRIPT.py
#      keeping what the program, the runtime and the dumper printed in logs/NAME.log
#      ("== stdout", "== stderr"; the program's MARKER line is the ground truth of the Python
#      side, the runtime's stderr lines that of the reason); "check" runs are python.exe alone
#      (no dumper): their log and exit code are kept, no dump;
#   4. keeps every dump as Wine wrote it in $ENDINGS_CACHE/raw-dumps (full-memory ones in
#      $ENDINGS_CACHE/full-dumps); commits full-memory dumps trimmed of Wine's own DLL images
#      (../python/src/trim_full.py); every committed dump is xz -9 compressed;
#   5. regenerates manifest.json with src/facts.py (its own minidump reader, not dumpkit); a
#      named run recomputes only the named entries and keeps the others as they are.
#
# Usage: ./build.sh [NAME...]      (default: every scenario; a named one is remade alone)
# Environment: ENDINGS_CACHE (default cache-endings beside the repository), WINEPREFIX (default
# $ENDINGS_CACHE/wineprefix), WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
SHARED=$REPO/../shared/winpython
DUMPER=$REPO/sample_dumps/bin/dumper.exe
TRIM=$REPO/sample_dumps/python/src/trim_full.py
CACHE=${ENDINGS_CACHE:-$(dirname "$REPO")/cache-endings}
export WINEPREFIX=${WINEPREFIX:-$CACHE/wineprefix}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}
WINESERVER=${WINE%wine64}wineserver
WINE_DLLS=/usr/lib/x86_64-linux-gnu/wine/x86_64-windows

# name | python | kind (normal | full | check = python.exe alone, no dump) | script | folder
# (folder: the interpreter as the prefix sees it, C:\<folder>\python.exe)
SCENARIOS="
fatal_gil_py38|38|normal|fatal_gil|Python38
fatal_gil_py39|39|normal|fatal_gil|Python39
fatal_gil_py310|310|normal|fatal_gil|Python310
fatal_gil_py311|311|normal|fatal_gil|Python311
fatal_gil_py312|312|normal|fatal_gil|Python312
fatal_gil_py313|313|normal|fatal_gil|Python313
fatal_gil_full_py38|38|full|fatal_gil|Python38
fatal_gil_full_py311|311|full|fatal_gil|Python311
fatal_gil_full_py313|313|full|fatal_gil|Python313
fatal_overflow_py38|38|normal|fatal_overflow_retry|Python38
fatal_overflow_py39|39|normal|fatal_overflow_throw|Python39
fatal_overflow_py310|310|normal|fatal_overflow_throw|Python310
fatal_overflow_py311|311|normal|fatal_overflow_throw|Python311
fatal_overflow_py312|312|normal|fatal_overflow_throw|Python312
fatal_overflow_py313|313|normal|fatal_overflow_throw|Python313
fatal_overflow_retry_py39|39|check|fatal_overflow_retry|Python39
fatal_overflow_retry_py311|311|check|fatal_overflow_retry|Python311
fatal_overflow_retry_py313|313|check|fatal_overflow_retry|Python313
fatal_overflow_throw_py38|38|check|fatal_overflow_throw|Python38
fatal_startup_py38|38|normal|fatal_startup|AppPython38
fatal_startup_py312|312|normal|fatal_startup|AppPython312
os_abort_py38|38|normal|os_abort|Python38
os_abort_py312|312|normal|os_abort|Python312
sigabrt_py39|39|normal|sigabrt|Python39
sigabrt_py313|313|normal|sigabrt|Python313
os_exit3_py310|310|normal|os_exit3|Python310
os_exit3_py311|311|normal|os_exit3|Python311
terminate_self_py39|39|normal|terminate_self|Python39
terminate_self_py312|312|normal|terminate_self|Python312
sys_exit3_py38|38|normal|sys_exit3|Python38
sys_exit3_py310|310|normal|sys_exit3|Python310
sys_exit3_py313|313|normal|sys_exit3|Python313
assert_dll_py312|312|normal|assert_dll|Python312
two_pythons_py311|311|normal|two_pythons|Python311
delayload_dll_py312|312|normal|delayload_dll|Python312
delayload_proc_py310|310|normal|delayload_proc|Python310
"
wanted=("$@")
only=()
if [ ${#wanted[@]} -gt 0 ]; then
  # a named run: the manifest's other entries stay as they are (their raw dumps may not be in
  # this machine's cache)
  only=(--only "$(IFS=,; echo "${wanted[*]}")")
else
  mapfile -t wanted < <(echo "$SCENARIOS" | awk -F'|' 'NF>1{print $1}')
fi
for s in "${wanted[@]}"; do
  grep -q "^$s|" <<<"$SCENARIOS" || { echo "unknown scenario: $s" >&2; exit 2; }
done
test -f "$DUMPER" || { echo "missing $DUMPER (build ../build.sh first)" >&2; exit 2; }
test -f "$TRIM" || { echo "missing $TRIM" >&2; exit 2; }
start=$(date +%s)
mkdir -p "$CACHE"

# 1. the small DLLs (committed; rebuilt only when missing or asked for)
CC="x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared -nostdlib -e DllMain"
mkdir -p bin
if [ ! -f bin/assertlib.dll ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  $CC -DUNICODE -D_UNICODE -o bin/assertlib.dll src/assertlib.c -lucrt -lkernel32
fi
if [ ! -f bin/oldext.dll ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  x86_64-w64-mingw32-dlltool -d src/python39.def -l "$CACHE/libpython39.a"
  $CC -o bin/oldext.dll src/oldext.c "$CACHE/libpython39.a" -lkernel32
fi
# gpuext.pyd: python3.dll (stable ABI) a normal import, the two CUDA DLLs delay-loaded
if [ ! -f bin/gpuext.pyd ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  x86_64-w64-mingw32-dlltool -d src/python3.def -l "$CACHE/libpython3.a"
  # dlltool names its labels after the output file: __tailMerge_cudnn64_8_dll (as MSVC does),
  # __DELAY_IMPORT_DESCRIPTOR_cudnn64_8_dll, ...
  mkdir -p "$CACHE/delay"
  ( cd "$CACHE/delay"
    x86_64-w64-mingw32-dlltool -d "$HERE/src/cudnn64_8.def" -y cudnn64_8_dll
    x86_64-w64-mingw32-dlltool -d "$HERE/src/cudart64_110.def" -y cudart64_110_dll )
  # -Wl,--strip-debug: libmingwex's delayimp.o brings DWARF; the COFF symbols stay, as elsewhere
  $CC -Wl,--strip-debug -o bin/gpuext.pyd src/gpuext.c "$CACHE/delay/cudnn64_8_dll" \
    "$CACHE/delay/cudart64_110_dll" "$CACHE/libpython3.a" -lmingwex -lkernel32
  python3 src/set_delay_dir.py bin/gpuext.pyd
fi
if [ ! -f bin/cudart64_110.dll ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  x86_64-w64-mingw32-windres src/cudart_old.rc -O coff -o "$CACHE/cudart_old.res"
  $CC -o bin/cudart64_110.dll src/cudart_old.c "$CACHE/cudart_old.res" -lkernel32
fi
x86_64-w64-mingw32-objdump -p bin/gpuext.pyd > "$CACHE/gpuext.objdump"
grep -q "DLL Name: python3.dll" "$CACHE/gpuext.objdump" \
  || { echo "gpuext.pyd does not import python3.dll" >&2; exit 1; }
if grep -qiE "DLL Name: (cudnn64_8|cudart64_110)\.dll" "$CACHE/gpuext.objdump"; then
  echo "gpuext.pyd imports a CUDA DLL directly (not delay-loaded)" >&2; exit 1
fi
grep -qE "^Entry d 0*[1-9a-f][0-9a-f]* [0-9a-f]+ Delay Import Directory" "$CACHE/gpuext.objdump" \
  || { echo "gpuext.pyd has no Delay Import Directory" >&2; exit 1; }
python3 src/set_delay_dir.py --check bin/gpuext.pyd > "$CACHE/gpuext.delay"
grep -q " cudnn64_8.dll$" "$CACHE/gpuext.delay" && grep -q " cudart64_110.dll$" "$CACHE/gpuext.delay" \
  || { echo "gpuext.pyd's delay imports are not cudnn64_8.dll and cudart64_110.dll" >&2; exit 1; }
x86_64-w64-mingw32-objdump -p bin/cudart64_110.dll > "$CACHE/cudart.objdump"
grep -q "\] cudaRuntimeGetVersion$" "$CACHE/cudart.objdump" && ! grep -q cudaMallocAsync "$CACHE/cudart.objdump" \
  || { echo "cudart64_110.dll must export cudaRuntimeGetVersion and not cudaMallocAsync" >&2; exit 1; }
x86_64-w64-mingw32-objdump -p bin/assertlib.dll | grep -q "_wassert" \
  || { echo "assertlib.dll does not import _wassert" >&2; exit 1; }
x86_64-w64-mingw32-objdump -p bin/oldext.dll | grep -q "DLL Name: python39.dll" \
  || { echo "oldext.dll does not import python39.dll" >&2; exit 1; }

# 2. scratch interpreters and the Wine prefix
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  timeout 300 "$WINE" wineboot -i >/dev/null 2>&1 || true
fi
C=$WINEPREFIX/drive_c
mkdir -p "$C/scripts/oldext" "$CACHE/images" "$CACHE/raw-dumps" "$CACHE/full-dumps"
for v in 38 39 310 311 312 313; do
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
# the broken installations: the embeddable build without its standard library zip
for v in 38 312; do
  dir=$CACHE/images/AppPython$v
  if [ ! -f "$dir/.copied" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    cp -r "$CACHE/images/Python$v/." "$dir/" && rm -f "$dir/.copied" "$dir/python$v.zip"
    touch "$dir/.copied"
  fi
  ln -sfn "$dir" "$C/AppPython$v"
done
cp src/*.py bin/assertlib.dll "$C/scripts/"
cp bin/oldext.dll "$CACHE/images/Python39/python39.dll" "$C/scripts/oldext/"
# delayload_*: the backend module, and an old CUDA runtime on delayload_proc's PATH
CUDA_BIN="$C/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v11.0/bin"
mkdir -p "$C/scripts/gpu" "$CUDA_BIN"
cp bin/gpuext.pyd "$C/scripts/gpu/"
cp bin/cudart64_110.dll "$CUDA_BIN/"
if [ -n "$(find "$C" "$CACHE/images" /usr/lib/x86_64-linux-gnu/wine -iname cudnn64_8.dll 2>/dev/null | head -1)" ]; then
  echo "a cudnn64_8.dll exists in the prefix: delayload_dll needs it missing" >&2; exit 1
fi

# 3. the scenarios
mkdir -p logs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for s in "${wanted[@]}"; do
  IFS='|' read -r name ver kind script folder <<<"$(grep "^$s|" <<<"$SCENARIOS")"
  out="$HERE/$name.dmp"
  rm -f "$out" "$out.xz" "$HERE/$name.trimmed.dmp" "$HERE/$name.trimmed.dmp.xz"
  exe="C:\\$folder\\python.exe"
  prog="C:\\scripts\\$script.py"
  if [ "$kind" = check ]; then
    cmd=("$WINE" "$exe" "$prog")
  else
    opts=(--on-exit)
    [ "$kind" = full ] && opts+=(--full)
    cmd=("$WINE" "$DUMPER" "Z:${out//\//\\}" "${opts[@]}" "$exe" "$prog")
  fi
  echo "== $name ($kind, $exe $prog)"
  t0=$(date +%s.%N)
  # stdin /dev/null, stdout and stderr two pipes: python.exe dies in init_sys_streams when a
  # standard handle is a file or a terminal
  ( set +e +o pipefail
    cd "$C/scripts"
    ( timeout 900 "${cmd[@]}" </dev/null 2>&1 1>&3 | cat > "$TMP/err"
      echo "${PIPESTATUS[0]}" > "$TMP/rc" ) 3>&1 | cat > "$TMP/out" )
  t1=$(date +%s.%N)
  timeout 60 "$WINESERVER" -k 2>/dev/null || true
  # Wine's ucrtbase _wassert writes its message as UTF-16LE bytes: logged decoded, and said so
  python3 - "$TMP/out" "$TMP/err" "logs/$name.log" <<'PY'
import re, sys
out, err, log = (open(p, "rb").read() if i < 2 else p for i, p in enumerate(sys.argv[1:]))
spans = 0
def wide(m):
    global spans
    spans += 1
    return m.group(0).decode("utf-16-le").encode()
err = re.sub(rb"(?:[\t\n\r\x20-\x7e]\x00){4,}", wide, err)
lines = err.splitlines(keepends=True)
if len(lines) > 240:  # a chained RecursionError traceback of the checks: 20,000 lines
    lines = lines[:100] + [b"[build.sh: %d lines left out]\n" % (len(lines) - 200)] + lines[-100:]
with open(log, "wb") as f:
    f.write(b"== stdout\n" + out + (b"" if out.endswith(b"\n") or not out else b"\n"))
    f.write(b"== stderr\n" + b"".join(lines) + (b"" if err.endswith(b"\n") or not err else b"\n"))
    if spans:
        f.write(b"stderr_utf16le_spans %d\n" % spans)
    f.write(b"stderr_lines %d\n" % len(err.splitlines()))
PY
  { echo "elapsed_seconds $(python3 -c "print(round($t1 - $t0, 1))")"
    echo "program src/$script.py"
    echo "interpreter C:\\$folder"; } >> "logs/$name.log"
  if [ "$kind" = check ]; then
    echo "exit_code $(cat "$TMP/rc")" >> "logs/$name.log"
    cat "logs/$name.log" | cut -c1-300
    if [ -e "$out" ]; then echo "$name: a check wrote a dump" >&2; exit 1; fi
    continue
  fi
  cat "logs/$name.log" | cut -c1-300
  test -s "$out" || { echo "no dump for $name" >&2; exit 1; }
  cp "$out" "$CACHE/raw-dumps/$name.dmp"
  if [ "$kind" = full ]; then
    # 55-80 MB raw, most of it Wine's own DLL images: the raw dump stays in the cache
    mv "$out" "$CACHE/full-dumps/$name.dmp"
    rm -f "$CACHE/raw-dumps/$name.dmp"
    stat -c 'raw_full_bytes %s' "$CACHE/full-dumps/$name.dmp" >> "logs/$name.log"
    out="$HERE/$name.trimmed.dmp"
    python3 "$TRIM" "$CACHE/full-dumps/$name.dmp" "$out" | sed 's/^/trim_full /' | tee -a "logs/$name.log"
  fi
  # 4. compress every dump: Wine's normal dumps here are 0.5-1.5 MB and shrink 5-8 times with
  # xz -9 (dumpkit reads .dmp.xz directly)
  stat -c 'raw_bytes %s' "$out" >> "logs/$name.log"
  t0=$(date +%s.%N)
  timeout 1200 xz -9 -T2 -f "$out"
  t1=$(date +%s.%N)
  echo "xz_seconds $(python3 -c "print(round($t1 - $t0, 1))") xz_bytes $(stat -c %s "$out.xz")" >> "logs/$name.log"
done

# 5. the manifest
timeout 900 python3 src/facts.py --logs logs --images "$CACHE/images" --wine-dlls "$WINE_DLLS" \
  --raw-dumps "$CACHE/raw-dumps" --full-dumps "$CACHE/full-dumps" --manifest manifest.json \
  "${only[@]}" .
echo "build.sh: $(( $(date +%s) - start )) s"
ls -la
du -sh .
