#!/bin/bash
# Rebuild the real Python / NumPy / TensorFlow crash dumps in this folder, on Debian 12.
#
# Needs:
#   apt-get install -y --no-install-recommends wine64 xz-utils unzip python3 python3-pip
#   ../../../shared/winpython/cpython-3.8-amd64  (the PSF's CPython 3.8 x64, see its README)
#   ../bin/dumper.exe                            (the project's out-of-process dumper)
#   network access to PyPI (only for the first run: wheels are cached)
# Used for the committed dumps: Wine 8.0 (Debian 8.0~repack-4), pip 24 on CPython 3.11.
#
# What it does:
#   1. downloads the pinned Windows wheels (requirements-*.txt, sha256-checked by pip)
#      into $PYDUMPS_CACHE/wheels;
#   2. installs two scratch copies of the PSF interpreter under $PYDUMPS_CACHE/images and
#      unzips the wheels into their Lib\site-packages:
#        images/Python38     = C:\Python38                                  (NumPy 1.24.4)
#        images/Python38-tf  = C:\users\<wine user>\AppData\Local\Programs\Python\Python38
#                              (TensorFlow 2.13.0 and what pip resolved for it)
#      and links them into a Wine prefix at those Windows paths, so the dumps record the
#      paths a real user's would;
#   3. runs every scenario (src/NAME.py, copied to C:\scripts) under `timeout` as
#        dumper.exe OUT.dmp [--full] python.exe C:\scripts\NAME.py [ARGS]
#      keeping stdout/stderr in logs/NAME.log (the script's MARKER line has the versions);
#   4. keeps full-memory dumps in $PYDUMPS_CACHE/full-dumps and commits them without the
#      memory of Wine's own DLLs (src/trim_full.py: 55-80 MB raw would be 10-12 MB xz);
#      numpy_strided_av_full (162 MB raw) also without NumPy's OpenBLAS image
#      (`trim_full.py --also-drop '\site-packages\numpy\.libs\'`: 32 MB mapped, 10.8 MB xz
#      with it, 6.9 MB without; NumPy's pyds stay), then
#      xz-compresses every dump over 2 MB and regenerates manifest.json (src/pyfacts.py);
#   5. commits the dumps whose images are NumPy's or TensorFlow's as bundles (NAME.dkb:
#      the dump plus the image pages dumpkit's analysis reads, `dumpkit bundle`), so their
#      tests run without the images; their NAME.dmp.xz moves to $PYDUMPS_CACHE/bundled
#      (the bundle holds the same dump: the manifest's raw_sha256 is the bundle's dump sha256).
# The wheels and the extracted images (642 MB for TensorFlow's pyd alone) stay in the cache,
# never in the repository: dumpkit needs them as --image-path to unwind through MSVC code
# (or a bundle made where they were).
#
# Usage: ./build.sh [SCENARIO...]        (default: all; a scenario's dump is remade alone)
# Environment: PYDUMPS_CACHE (default /work/pycache-dumps), WINEPREFIX (default
# $PYDUMPS_CACHE/wineprefix), WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
WINPY=$REPO/../shared/winpython/cpython-3.8-amd64
DUMPER=$REPO/sample_dumps/bin/dumper.exe
CACHE=${PYDUMPS_CACHE:-/work/pycache-dumps}
export WINEPREFIX=${WINEPREFIX:-$CACHE/wineprefix}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}

# name | environment | dump type | script | script arguments
SCENARIOS="
py_recursion|py|normal|py_recursion|
py_recursion_full|py|full|py_recursion|10000
repr_recursion|py|normal|repr_recursion|
repr_recursion_full|py|full|repr_recursion|100000
json_recursion|py|normal|json_recursion|
pickle_recursion|py|normal|pickle_recursion|
thread_stack_size|py|normal|thread_stack_size|
numpy_object_recursion|py|normal|numpy_object_recursion|
numpy_shape_recursion|py|normal|numpy_shape_recursion|
numpy_cython_recursion|py|normal|numpy_cython_recursion|
numpy_strided_av|py|normal|numpy_strided_av|
numpy_strided_av_full|py|full|numpy_strided_av|
faulthandler_null|py|normal|faulthandler_null|
tf_nest_flatten|tf|normal|tf_nest_flatten|
"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  mapfile -t wanted < <(echo "$SCENARIOS" | awk -F'|' 'NF>1{print $1}')
fi
for s in "${wanted[@]}"; do
  echo "$SCENARIOS" | grep -q "^$s|" || { echo "unknown scenario: $s" >&2; exit 2; }
done
needs_tf=0
for s in "${wanted[@]}"; do case $s in tf_*) needs_tf=1;; esac; done

test -f "$WINPY/python38.dll" || { echo "missing $WINPY (shared/winpython)" >&2; exit 2; }
test -f "$DUMPER" || { echo "missing $DUMPER (build ../build.sh first)" >&2; exit 2; }
start=$(date +%s)

# 1. pinned wheels (pip checks every sha256; a cached wheel is not downloaded again)
mkdir -p "$CACHE/wheels"
download() { # requirements-file
  timeout 1800 python3 -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
    --platform win_amd64 --python-version 3.8 --implementation cp --abi cp38 \
    -r "$1" -d "$CACHE/wheels"
}
download requirements-numpy.txt
[ $needs_tf = 1 ] && download requirements-tf.txt

# 2. the interpreter installations (rebuilt only when missing)
wheel_files() { # requirements-file -> the wheel file names in the cache
  grep -v '^#' "$1" | cut -d' ' -f1 | while IFS='=' read -r name _ version; do
    norm=$(echo "$name" | tr '-' '_' | tr '[:upper:]' '[:lower:]')
    for f in "$CACHE/wheels"/*.whl; do
      base=$(basename "$f"); lower=$(echo "$base" | tr '[:upper:]' '[:lower:]')
      case $lower in "$norm-$version-"*) echo "$f";; esac
    done
  done
}
install_env() { # image-dir requirements-file
  local dir=$1 req=$2
  if [ -f "$dir/.installed" ]; then return; fi
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$WINPY/." "$dir/"
  mkdir -p "$dir/Lib/site-packages"
  wheel_files "$req" | while read -r whl; do
    unzip -q -o "$whl" -d "$dir/Lib/site-packages"
  done
  touch "$dir/.installed"
}
install_env "$CACHE/images/Python38" requirements-numpy.txt
[ $needs_tf = 1 ] && install_env "$CACHE/images/Python38-tf" requirements-tf.txt

if [ ! -f "$WINEPREFIX/system.reg" ]; then
  timeout 300 "$WINE" wineboot -i >/dev/null 2>&1 || true
fi
C=$WINEPREFIX/drive_c
USERDIR=$(ls -d "$C/users"/* | grep -v -i '/public$' | head -1)
TFDIR=$USERDIR/AppData/Local/Programs/Python/Python38
mkdir -p "$(dirname "$TFDIR")" "$C/scripts"
ln -sfn "$CACHE/images/Python38" "$C/Python38"
[ $needs_tf = 1 ] && ln -sfn "$CACHE/images/Python38-tf" "$TFDIR"
WIN_TFDIR="C:\\users\\$(basename "$USERDIR")\\AppData\\Local\\Programs\\Python\\Python38"

# 3. the scenarios
mkdir -p logs
cp src/*.py "$C/scripts/"
for s in "${wanted[@]}"; do
  IFS='|' read -r name env kind script args <<<"$(echo "$SCENARIOS" | grep "^$s|")"
  out="$HERE/$name.dmp"
  rm -f "$out" "$out.xz" "$HERE/$name.trimmed.dmp" "$HERE/$name.trimmed.dmp.xz"
  full=()
  [ "$kind" = full ] && full=(--full)
  pydir='C:\Python38'
  [ "$env" = tf ] && pydir=$WIN_TFDIR
  echo "== $name ($kind dump, $pydir\\python.exe C:\\scripts\\$script.py $args)"
  t0=$(date +%s.%N)
  # stdin /dev/null and stdout a pipe: python.exe dies in init_sys_streams otherwise
  # shellcheck disable=SC2086
  (cd "$C/scripts" && timeout 900 "$WINE" "$DUMPER" "Z:${out//\//\\}" "${full[@]}" \
     "$pydir\\python.exe" "C:\\scripts\\$script.py" $args </dev/null 2>&1 | cat) > "logs/$name.log" || true
  t1=$(date +%s.%N)
  echo "elapsed_seconds $(python3 -c "print(round($t1 - $t0, 1))")" >> "logs/$name.log"
  cat "logs/$name.log"
  timeout 60 "${WINE%wine64}wineserver" -k 2>/dev/null || true
  test -s "$out" || { echo "no dump for $name" >&2; exit 1; }
  if [ "$kind" = full ]; then
    # a full-memory dump is 55-80 MB, 42 MB of it Wine's own DLL images: the raw dump stays
    # in the cache, the repository gets it without those (src/trim_full.py)
    mkdir -p "$CACHE/full-dumps"
    mv "$out" "$CACHE/full-dumps/$name.dmp"
    rm -f "$HERE/$name.trimmed.dmp" "$HERE/$name.trimmed.dmp.xz"
    out="$HERE/$name.trimmed.dmp"
    also=()  # NumPy's OpenBLAS image (numpy\.libs, 32 MB mapped) would put the xz over 10 MiB
    if [ "$name" = numpy_strided_av_full ]; then also=(--also-drop '\site-packages\numpy\.libs\'); fi
    python3 src/trim_full.py "$CACHE/full-dumps/$name.dmp" "$out" "${also[@]}" | tee -a "logs/$name.log"
  fi
  # 4. compress what is over 2 MB
  if [ "$(stat -c %s "$out")" -gt 2000000 ]; then
    stat -c 'raw_bytes %s' "$out" >> "logs/$name.log"
    timeout 1200 xz -9 -T2 -f "$out"
  fi
done

mkdir -p "$CACHE/bundled"
# (a bundled scenario not remade here whose raw dump is not in $CACHE/bundled, as on a
# machine whose cache was made by a later run, drops out of manifest.json: take its entry
# back from git, as was done for numpy_cython_recursion's first build)
timeout 900 python3 src/pyfacts.py --manifest manifest.json --logs logs \
  --images "$CACHE/images" . "$CACHE/bundled"

# 5. bundles for the dumps whose images are too big to commit (DUMPKIT: the dumpkit command
#    of this checkout, e.g. from its venv; HOME empty so that no Wine prefix serves the
#    recorded paths)
BUNDLED="numpy_object_recursion numpy_shape_recursion numpy_cython_recursion tf_nest_flatten"
for name in $BUNDLED; do
  src=$HERE/$name.dmp.xz
  [ -f "$src" ] || src=$HERE/$name.dmp  # a dump of 2 MB or less is not compressed (step 4)
  [ -f "$src" ] || continue  # not remade in this run: its bundle stays
  case $src in *.xz) xz -dkc "$src" > "$CACHE/bundled/$name.dmp" ;; *) cp "$src" "$CACHE/bundled/$name.dmp" ;; esac
  HOME=$(mktemp -d) timeout 1800 ${DUMPKIT:-dumpkit} bundle "$CACHE/bundled/$name.dmp" \
    --image-path "$CACHE/images" -o "$HERE/$name.dkb"
  rm -f "$CACHE/bundled/$name.dmp"
  case $src in *.xz) mv "$src" "$CACHE/bundled/$name.dmp.xz" ;; *) mv "$src" "$CACHE/bundled/$name.dmp" ;; esac
done
echo "build.sh: $(( $(date +%s) - start )) s"
ls -la
du -sh .
