#!/bin/bash
# Rebuild tf_nest_flatten_py311: a real stack-overflow crash dump of python.org's CPython 3.11.9
# (x64) running tensorflow-intel 2.18.0 under Wine 8, and its dumpkit bundle, from scratch.
#
# Needs:
#   apt-get install -y --no-install-recommends wine64 unzip python3 python3-pip
#   ../../../../shared/winpython/cpython-3.11-amd64  (python.org's 3.11.9 embeddable package)
#   ../../bin/dumper.exe                             (the project's out-of-process dumper)
#   ../../python/src/tf_nest_flatten.py              (the scenario, reused as is)
#   network access to PyPI for the first run (389 MB + 62 MB of wheels, then cached)
#   dumpkit on PATH (or DUMPKIT=...), e.g. the checkout's .venv, for step 5
# Used for the committed files: Debian 12, Wine 8.0 (8.0~repack-4), pip 23.2.1 on CPython 3.11.
#
# What it does:
#   1. downloads the pinned Windows wheels (requirements-tf311.txt, sha256-checked by pip)
#      into $TF311_CACHE/wheels;
#   2. makes a scratch copy of the interpreter, $TF311_CACHE/images/Python311, adds
#      `Lib\site-packages` and `import site` to its python311._pth, unzips the wheels there and
#      removes h5py (its hdf5.dll imports ucrtbase!feholdexcept, which Wine 8 lacks; TensorFlow
#      imports without it);
#   3. links it into its own Wine prefix ($TF311_CACHE/wineprefix) at the per-user install path
#      C:\users\<wine user>\AppData\Local\Programs\Python\Python311, as a real user's would be;
#   4. runs   dumper.exe OUT.dmp PYDIR\python.exe C:\scripts\tf_nest_flatten.py   under
#      `timeout` (MiniDumpNormal, first chance), logging to logs/tf_nest_flatten_py311.log;
#      the raw dump stays in $TF311_CACHE/dumps (too big for the repository), facts.json is
#      derived from it by facts.py (own struct-based minidump reader, not dumpkit);
#   5. bundles it: `dumpkit bundle` with --image-path $TF311_CACHE/images (the dump plus the
#      image pages dumpkit's analysis reads) -> tf_nest_flatten_py311.dkb.
#
# Usage: ./build.sh
# Environment: TF311_CACHE (default /work/tf311-cache), WINEPREFIX (default
# $TF311_CACHE/wineprefix; never shared with another job: this script runs wineserver -k in it),
# WINE (default /usr/lib/wine/wine64), DUMPKIT (default dumpkit).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../../.. && pwd)
WINPY=$REPO/../shared/winpython/cpython-3.11-amd64
DUMPER=$REPO/sample_dumps/bin/dumper.exe
SCRIPT=$REPO/sample_dumps/python/src/tf_nest_flatten.py
CACHE=${TF311_CACHE:-/work/tf311-cache}
export WINEPREFIX=${WINEPREFIX:-$CACHE/wineprefix}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}
NAME=tf_nest_flatten_py311

test -f "$WINPY/python311.dll" || { echo "missing $WINPY (shared/winpython)" >&2; exit 2; }
test -f "$DUMPER" || { echo "missing $DUMPER (build ../../build.sh first)" >&2; exit 2; }
test -f "$SCRIPT" || { echo "missing $SCRIPT" >&2; exit 2; }
start=$(date +%s)

# 1. pinned wheels (pip checks every sha256; a cached wheel is not downloaded again)
mkdir -p "$CACHE/wheels"
timeout 1800 python3 -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
  --platform win_amd64 --python-version 3.11 --implementation cp --abi cp311 \
  -r requirements-tf311.txt -d "$CACHE/wheels"

# 2. the installation (rebuilt only when missing)
wheel_files() { # the wheel files of requirements-tf311.txt in the cache
  grep -v '^#' requirements-tf311.txt | cut -d' ' -f1 | while IFS='=' read -r name _ version; do
    norm=$(echo "$name" | tr '-' '_' | tr '[:upper:]' '[:lower:]')
    found=
    for f in "$CACHE/wheels"/*.whl; do
      base=$(basename "$f"); lower=$(echo "$base" | tr '[:upper:]' '[:lower:]')
      case $lower in "$norm-$version-"*) echo "$f"; found=1;; esac
    done
    [ -n "$found" ] || { echo "no wheel for $name==$version" >&2; exit 1; }
  done
}
PY=$CACHE/images/Python311
if [ ! -f "$PY/.installed" ]; then
  rm -rf "$PY" && mkdir -p "$PY"
  cp -r "$WINPY/." "$PY/" && chmod -R u+w "$PY"
  # the embeddable package's ._pth disables site and Lib\site-packages (CRLF, as shipped)
  printf 'python311.zip\r\n.\r\nLib\\site-packages\r\n\r\n# Uncomment to run site.main() automatically\r\nimport site\r\n' \
    > "$PY/python311._pth"
  mkdir -p "$PY/Lib/site-packages"
  wheel_files | while read -r whl; do unzip -q -o "$whl" -d "$PY/Lib/site-packages"; done
  rm -rf "$PY/Lib/site-packages/h5py" "$PY/Lib/site-packages"/h5py-*.dist-info
  touch "$PY/.installed"
fi

# 3. the Wine prefix and the per-user install path
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  timeout 300 "$WINE" wineboot -i </dev/null >/dev/null 2>&1 || true
fi
C=$WINEPREFIX/drive_c
USERDIR=$(ls -d "$C/users"/* | grep -v -i '/public$' | head -1)
PYLINK=$USERDIR/AppData/Local/Programs/Python/Python311
mkdir -p "$(dirname "$PYLINK")" "$C/scripts"
ln -sfn "$PY" "$PYLINK"
WIN_PYDIR="C:\\users\\$(basename "$USERDIR")\\AppData\\Local\\Programs\\Python\\Python311"
cp "$SCRIPT" "$C/scripts/"

# 4. the crash
mkdir -p logs "$CACHE/dumps"
out=$CACHE/dumps/$NAME.dmp
log=logs/$NAME.log
rm -f "$out"
echo "== $NAME (normal dump, $WIN_PYDIR\\python.exe C:\\scripts\\tf_nest_flatten.py)"
t0=$(date +%s.%N)
# stdin /dev/null and stdout a pipe: python.exe dies in init_sys_streams otherwise
(cd "$C/scripts" && timeout 1800 "$WINE" "$DUMPER" "Z:${out//\//\\}" \
   "$WIN_PYDIR\\python.exe" "C:\\scripts\\tf_nest_flatten.py" </dev/null 2>&1 | cat) > "$log" || true
t1=$(date +%s.%N)
echo "elapsed_seconds $(python3 -c "print(round($t1 - $t0, 1))")" >> "$log"
timeout 60 "${WINE%wine64}wineserver" -k 2>/dev/null || true
test -s "$out" || { cat "$log"; echo "no dump written" >&2; exit 1; }
stat -c 'raw_bytes %s' "$out" >> "$log"
echo "raw_sha256 $(sha256sum "$out" | cut -d' ' -f1)" >> "$log"
cat "$log"
python3 facts.py --dump "$out" --log "$log" --script "$SCRIPT" --images "$CACHE/images" \
  --dump-name "$NAME.dmp" -o facts.json

# 5. the bundle: images from --image-path only (WINEPREFIX unset and HOME empty, so that no
#    Wine prefix serves the recorded C:\ paths; with WINEPREFIX set, dumpkit would also take
#    pages of Wine's own ntdll/kernelbase/kernel32 from the prefix)
env -u WINEPREFIX HOME="$(mktemp -d)" timeout 3600 "${DUMPKIT:-dumpkit}" bundle "$out" \
  --image-path "$CACHE/images" -o "$HERE/$NAME.dkb"
echo "build.sh: $(( $(date +%s) - start )) s"
ls -la "$HERE" "$out"
