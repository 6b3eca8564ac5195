#!/bin/bash
# Rebuild the real dumps of native aborts that carry their reason (TensorFlow's CHECK failure,
# an uncaught C++ exception ending in std::terminate, the Universal CRT's assert) from scratch.
#
# Needs (Debian 12):
#   apt-get install -y --no-install-recommends wine64 clang lld llvm xz-utils unzip python3 python3-pip
#   ../../../shared/winpython/cpython-3.1{1,2,3}-amd64  (python.org's embeddable builds, see its README)
#   ../bin/dumper.exe                                   (the project's out-of-process dumper, --on-exit)
#   ../python/src/trim_full.py                          (drops Wine's DLL images from full dumps)
#   network access to PyPI for the first TensorFlow run (352 MB of wheels, then cached)
# Used for the committed files: Wine 8.0 (Debian 8.0~repack-4), clang/lld 14.0.6 (Debian
# 1:14.0-55.7~deb12u1), pip 23.2.1 on CPython 3.11.
#
# What it does:
#   1. builds bin/shardlib.dll from src/shardlib.cpp if it is missing (or REBUILD_DLL=1; the
#      committed DLL is the one the dumps were made with): clang --target=x86_64-pc-windows-msvc
#      to assembly, sets MSVC's noexcept bit (EHFlags 4) in load_shard's FuncInfo (clang 14
#      leaves it out; see src/shardlib.cpp), assembles, and links with lld-link against import
#      libraries that llvm-dlltool makes from src/*.def (vcruntime140.dll, the UCRT's
#      api-ms-win-crt-runtime-l1-1-0.dll): no MSVC headers or libraries; checks the imports and
#      the type name ".?AUShardError@@" in the result;
#   2. downloads the pinned TensorFlow wheels (requirements-tf.txt, sha256-checked by pip) into
#      $ABORTS_CACHE/wheels when a tf_* scenario is wanted;
#   3. makes the interpreters under $ABORTS_CACHE/images (the shared folders stay untouched):
#        Python311-tf = 3.11.9 + the wheels unzipped into Lib\site-packages (h5py removed: its
#                       hdf5.dll needs ucrtbase!feholdexcept, which Wine 8 lacks), linked into
#                       the prefix at C:\users\<user>\AppData\Local\Programs\Python\Python311
#        Python312, Python313 = plain copies, linked as C:\Python312, C:\Python313
#      and copies src/*.py and bin/shardlib.dll to C:\scripts;
#   4. runs every scenario under `timeout` as
#        dumper.exe OUT.dmp [--full] --on-exit PYTHON C:\scripts\SCRIPT.py [ARGS]
#      (abort() is _exit(3) under Wine: no exception, the dump is written at the breakpoint on
#      ntdll!RtlExitUserProcess), keeping what the program and the dumper printed in
#      logs/NAME.log (UTF-16LE runs, as Wine's _wassert writes them, are decoded and marked
#      "[utf-16le]"; the raw bytes stay in $ABORTS_CACHE/logs); "check" scenarios run python.exe
#      without the dumper and must end with exit code 0 (their log is kept, no dump);
#   5. keeps every raw dump in $ABORTS_CACHE/dumps; full-memory ones are trimmed of Wine's DLL
#      images (../python/src/trim_full.py) into $ABORTS_CACHE/dumps/NAME.trimmed.dmp and, being
#      over a gigabyte with TensorFlow's 732 MB image and 280 MB of heap, stay there ("cache"
#      kind); the others are committed, xz -9 compressed when over 2 MB;
#   6. regenerates manifest.json with src/facts.py (its own struct-based minidump reader, not
#      dumpkit).
#
# Usage: ./build.sh [NAME...]      (default: every scenario; a named one is remade alone)
# Environment: ABORTS_CACHE (default cache-aborts beside the repository), WINEPREFIX (default
# $ABORTS_CACHE/wineprefix; never shared with another job: this script runs wineserver -k in
# it), WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
SHARED=$REPO/../shared/winpython
DUMPER=$REPO/sample_dumps/bin/dumper.exe
TRIM=$REPO/sample_dumps/python/src/trim_full.py
CACHE=${ABORTS_CACHE:-$(dirname "$REPO")/cache-aborts}
export WINEPREFIX=${WINEPREFIX:-$CACHE/wineprefix}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}
WINESERVER=${WINE%wine64}wineserver

# name | interpreter | kind (normal | full = kept in the cache | check = must exit 0, no dumper)
#      | script | arguments
SCENARIOS="
tf_check_failed_py311|311-tf|normal|tf_check_failed|
tf_check_failed_full_py311|311-tf|full|tf_check_failed|
cxx_terminate_py312|312|normal|cxx_terminate|
cxx_terminate_checked_py312|312|check|cxx_terminate|checked
assert_ucrt_py313|313|normal|assert_ucrt|
"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  mapfile -t wanted < <(echo "$SCENARIOS" | awk -F'|' 'NF>1{print $1}')
fi
needs_tf=0
for s in "${wanted[@]}"; do
  echo "$SCENARIOS" | grep -q "^$s|" || { echo "unknown scenario: $s" >&2; exit 2; }
  case $s in tf_*) needs_tf=1;; esac
done
test -f "$DUMPER" || { echo "missing $DUMPER (build ../build.sh first)" >&2; exit 2; }
test -f "$TRIM" || { echo "missing $TRIM" >&2; exit 2; }
start=$(date +%s)

# 1. shardlib.dll (committed; rebuilt only when missing or asked for)
if [ ! -f bin/shardlib.dll ] || [ "${REBUILD_DLL:-0}" = 1 ]; then
  b=$CACHE/build && rm -rf "$b" && mkdir -p "$b" bin
  # __FILE__ (in the assertion) as MSVC would record a Windows build path
  clang++ --target=x86_64-pc-windows-msvc -O2 -fexceptions -fcxx-exceptions -fno-rtti \
    -ffreestanding -nostdinc "-fmacro-prefix-map=$HERE/src/=C:\\src\\shardlib\\" \
    -S "$HERE/src/shardlib.cpp" -o "$b/shardlib.s"
  # MSVC's FI_EHNOEXCEPT_FLAG (4) on the noexcept function's FuncInfo, and on nothing else
  awk '/^\$cppxdata\$load_shard:/ {inside = 1}
       inside && /# EHFlags$/ { if (!sub(/\.long\t1 /, ".long\t5 ")) exit 1; n++; inside = 0 }
       {print}
       END {if (n != 1) exit 1}' "$b/shardlib.s" > "$b/shardlib.noexcept.s" \
    || { echo "shardlib.s: load_shard's EHFlags not found as expected" >&2; exit 1; }
  clang --target=x86_64-pc-windows-msvc -c "$b/shardlib.noexcept.s" -o "$b/shardlib.obj"
  llvm-dlltool -m i386:x86-64 -d src/vcruntime140.def -l "$b/vcruntime140.lib"
  llvm-dlltool -m i386:x86-64 -d src/api-ms-win-crt-runtime-l1-1-0.def -l "$b/ucrt_runtime.lib"
  # /noentry: nothing to initialise (no CRT start-up code); /Brepro: a reproducible image;
  # /implib: its import library goes to the build folder, not next to the DLL
  lld-link /dll /noentry /nodefaultlib /machine:x64 /Brepro "/implib:$b/shardlib.lib" /out:bin/shardlib.dll \
    "$b/shardlib.obj" "$b/vcruntime140.lib" "$b/ucrt_runtime.lib"
fi
imports=$(x86_64-w64-mingw32-objdump -p bin/shardlib.dll)
for want in vcruntime140.dll _CxxThrowException __CxxFrameHandler3 __std_terminate \
            api-ms-win-crt-runtime-l1-1-0.dll _wassert; do
  echo "$imports" | grep -q "$want" || { echo "bin/shardlib.dll: no import $want" >&2; exit 1; }
done
grep -q -a '\.?AUShardError@@' bin/shardlib.dll || { echo "bin/shardlib.dll: no .?AUShardError@@" >&2; exit 1; }

# 2. pinned wheels (pip checks every sha256; a cached wheel is not downloaded again)
if [ $needs_tf = 1 ]; then
  mkdir -p "$CACHE/wheels"
  timeout 1800 python3 -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
    --platform win_amd64 --python-version 3.11 --implementation cp --abi cp311 \
    -r requirements-tf.txt -d "$CACHE/wheels"
fi

# 3. the interpreters and the Wine prefix
wheel_files() { # the wheel files of requirements-tf.txt in the cache
  grep -v '^#' requirements-tf.txt | cut -d' ' -f1 | while IFS='=' read -r name _ version; do
    norm=$(echo "$name" | tr '-' '_' | tr '[:upper:]' '[:lower:]')
    found=
    for f in "$CACHE/wheels"/*.whl; do
      lower=$(basename "$f" | tr '[:upper:]' '[:lower:]')
      case $lower in "$norm-$version-"*) echo "$f"; found=1;; esac
    done
    [ -n "$found" ] || { echo "no wheel for $name==$version" >&2; exit 1; }
  done
}
copy_python() { # version folder
  local v=$1 dir=$2 src=$SHARED/cpython-${1:0:1}.${1:1}-amd64
  test -f "$src/python$v.dll" || { echo "missing $src" >&2; exit 2; }
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$src/." "$dir/" && chmod -R u+w "$dir"
}
mkdir -p "$CACHE/images"
if [ $needs_tf = 1 ] && [ ! -f "$CACHE/images/Python311-tf/.installed" ]; then
  PY=$CACHE/images/Python311-tf
  copy_python 311 "$PY"
  # the embeddable package's ._pth disables site and Lib\site-packages (CRLF, as shipped)
  printf 'python311.zip\r\n.\r\nLib\\site-packages\r\n\r\n# Uncomment to run site.main() automatically\r\nimport site\r\n' \
    > "$PY/python311._pth"
  mkdir -p "$PY/Lib/site-packages"
  wheel_files | while read -r whl; do unzip -q -o "$whl" -d "$PY/Lib/site-packages"; done
  rm -rf "$PY/Lib/site-packages/h5py" "$PY/Lib/site-packages"/h5py-*.dist-info
  touch "$PY/.installed"
fi
for v in 312 313; do
  [ -f "$CACHE/images/Python$v/.copied" ] || { copy_python $v "$CACHE/images/Python$v"; touch "$CACHE/images/Python$v/.copied"; }
done
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  timeout 300 "$WINE" wineboot -i </dev/null >/dev/null 2>&1 || true
fi
C=$WINEPREFIX/drive_c
USERDIR=$(ls -d "$C/users"/* | grep -v -i '/public$' | head -1)
mkdir -p "$USERDIR/AppData/Local/Programs/Python" "$C/scripts"
ln -sfn "$CACHE/images/Python311-tf" "$USERDIR/AppData/Local/Programs/Python/Python311"
ln -sfn "$CACHE/images/Python312" "$C/Python312"
ln -sfn "$CACHE/images/Python313" "$C/Python313"
WIN_TFDIR="C:\\users\\$(basename "$USERDIR")\\AppData\\Local\\Programs\\Python\\Python311"
cp src/*.py bin/shardlib.dll "$C/scripts/"
# the scripts folder as the dumps record it (C:\scripts\shardlib.dll), for --image-path
mkdir -p "$CACHE/images/scripts" && cp bin/shardlib.dll "$CACHE/images/scripts/"

# UTF-16LE runs (Wine's _wassert writes its message as wide characters) decoded and marked
decode_log() {
  python3 -c '
import re, sys
data = sys.stdin.buffer.read()
def wide(m):
    return b"[utf-16le] " + m.group(0).decode("utf-16-le").encode("utf-8")
sys.stdout.buffer.write(re.sub(rb"(?:[\t\n\r\x20-\x7e]\x00){8,}", wide, data))'
}

# 4. the scenarios
mkdir -p logs "$CACHE/dumps" "$CACHE/logs"
for s in "${wanted[@]}"; do
  IFS='|' read -r name ver kind script args <<<"$(echo "$SCENARIOS" | grep "^$s|")"
  case $ver in 311-tf) py="$WIN_TFDIR\\python.exe";; *) py="C:\\Python$ver\\python.exe";; esac
  raw=$CACHE/dumps/$name.dmp
  rm -f "$raw" "$CACHE/dumps/$name.trimmed.dmp" "$HERE/$name.dmp" "$HERE/$name.dmp.xz"
  echo "== $name ($kind, $py C:\\scripts\\$script.py $args)"
  t0=$(date +%s.%N)
  # stdin /dev/null and stdout a pipe: python.exe dies in init_sys_streams otherwise
  if [ "$kind" = check ]; then
    # shellcheck disable=SC2086
    (cd "$C/scripts" && timeout 900 "$WINE" "$py" "C:\\scripts\\$script.py" $args </dev/null 2>&1 | cat;
     echo "exit_code ${PIPESTATUS[0]}") > "$CACHE/logs/$name.raw" || true
  else
    full=()
    [ "$kind" = full ] && full=(--full)
    # shellcheck disable=SC2086
    (cd "$C/scripts" && timeout 1800 "$WINE" "$DUMPER" "Z:${raw//\//\\}" "${full[@]}" --on-exit \
       "$py" "C:\\scripts\\$script.py" $args </dev/null 2>&1 | cat) > "$CACHE/logs/$name.raw" || true
  fi
  t1=$(date +%s.%N)
  decode_log < "$CACHE/logs/$name.raw" > "logs/$name.log"
  echo "elapsed_seconds $(python3 -c "print(round($t1 - $t0, 1))")" >> "logs/$name.log"
  timeout 60 "$WINESERVER" -k 2>/dev/null || true
  if [ "$kind" = check ]; then
    cat "logs/$name.log"
    grep -q '^exit_code 0$' "logs/$name.log" || { echo "$name was expected to exit with 0" >&2; exit 1; }
    continue
  fi
  test -s "$raw" || { cat "logs/$name.log"; echo "no dump for $name" >&2; exit 1; }
  grep -q '^dumper: process exit through ntdll!' "logs/$name.log" \
    || { cat "logs/$name.log"; echo "$name: the dump is not of the process's own exit" >&2; exit 1; }
  stat -c 'raw_bytes %s' "$raw" >> "logs/$name.log"
  echo "raw_sha256 $(sha256sum "$raw" | cut -d' ' -f1)" >> "logs/$name.log"
  if [ "$kind" = full ]; then
    python3 "$TRIM" "$raw" "$CACHE/dumps/$name.trimmed.dmp" | sed 's/^/trim_full /' >> "logs/$name.log"
    stat -c 'trimmed_bytes %s' "$CACHE/dumps/$name.trimmed.dmp" >> "logs/$name.log"
    cat "logs/$name.log"
    continue
  fi
  # 5. the committed copy, compressed when over 2 MB
  cp "$raw" "$HERE/$name.dmp"
  if [ "$(stat -c %s "$HERE/$name.dmp")" -gt 2000000 ]; then
    t0=$(date +%s.%N)
    timeout 1200 xz -9 -T2 -f "$HERE/$name.dmp"
    t1=$(date +%s.%N)
    echo "xz_seconds $(python3 -c "print(round($t1 - $t0, 1))") xz_bytes $(stat -c %s "$HERE/$name.dmp.xz")" >> "logs/$name.log"
  fi
  cat "logs/$name.log"
done

# 6. the manifest
timeout 1800 python3 src/facts.py --logs logs --dumps "$CACHE/dumps" --dll bin/shardlib.dll \
  --images "$CACHE/images" \
  --requirements requirements-tf.txt --manifest manifest.json .
echo "build.sh: $(( $(date +%s) - start )) s"
ls -la
du -sh .
