#!/bin/bash
# Rebuild the real dumps of runtime DLLs that collide in a Python process (this folder).
#
# Needs (Debian 12):
#   apt-get install -y --no-install-recommends wine64 xz-utils python3 python3-pip
#   ../../../shared/winpython/cpython-3.1X-amd64   (python.org's embeddable builds, its README)
#   ../bin/dumper.exe                              (the project's out-of-process dumper, --on-exit)
#   pip reaching the package index (the wheels are pinned by sha256 in requirements-*.txt)
# Used for the committed files: Wine 8.0 (Debian 8.0~repack-4), pip 26.3, xz-utils 5.4.1.
#
# What it does:
#   1. downloads the pinned Windows wheels into $COLLISIONS_CACHE/wheels (pip download
#      --only-binary=:all: --platform win_amd64 --no-deps --require-hashes; never committed);
#   2. makes one interpreter folder per environment under $COLLISIONS_CACHE/envs/ENV: a copy
#      of python.org's embeddable CPython with `import site` enabled and the wheels laid out
#      as pip would on Windows (src/install_wheel.py; .data/data into the interpreter folder),
#      linked into a Wine prefix of its own as C:\Python3X (C:\apps\legacy for the --target
#      wheel of two_cuda_runtimes); src/*.py go to C:\scripts;
#   3. runs every scenario (one at a time, under `timeout`) as
#        dumper.exe OUT.dmp [--on-exit] C:\Python3X\python.exe C:\scripts\SCRIPT.py
#      with the scenario's environment (KMP_AFFINITY=disabled everywhere: Intel's OpenMP
#      stops at start-up under Wine without it; WINEDLLOVERRIDES=msvcp140=n,b where a wheel's
#      own msvcp140.dll must be used) and keeps what the program and the dumper printed in
#      logs/NAME.log (the program's MARKER line is its own account of what it loaded);
#   4. keeps every raw dump in $COLLISIONS_CACHE/raw-dumps, xz -9 compresses the committed
#      copy when it is over 2 MB;
#   5. regenerates manifest.json with src/facts.py (its own struct readers, never dumpkit).
#
# Usage: ./build.sh [NAME...]      (default: every scenario; a named one is remade alone)
# Environment: COLLISIONS_CACHE (default cache-collisions beside the repository), WINEPREFIX (default
# $COLLISIONS_CACHE/wineprefix), WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
SHARED=$REPO/../shared/winpython
DUMPER=$REPO/sample_dumps/bin/dumper.exe
CACHE=${COLLISIONS_CACHE:-$(dirname "$REPO")/cache-collisions}
export WINEPREFIX=${WINEPREFIX:-$CACHE/wineprefix}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}
WINESERVER=${WINE%wine64}wineserver
WHEELS=$CACHE/wheels

# environment | python | requirements file | wheels installed (file name prefixes, in order)
ENVS="
omp_py311|311|py311|intel_openmp-2026.2.0 ctranslate2-4.8.5
omp_py312|312|py312|intel_openmp-2026.2.0 ctranslate2-4.8.5
msvcp140_py311|311|py311|msvc_runtime-14.34.31931 ctranslate2-4.8.5
cuda_py311|311|py311|nvidia_cuda_runtime_cu11-11.8.89 nvidia_cuda_runtime_cu12-12.9.79 ctranslate2-4.8.5
"
# wheels laid out as `pip install --target C:\apps\legacy` (environment.legacy)
LEGACY="cuda_py311|legacy-py311|ctranslate2-3.24.0"

# name | environment | script | dumper options | extra environment (KEY=VALUE ...)
SCENARIOS="
omp_duplicate_py311|omp_py311|omp_duplicate|--on-exit|
omp_single_py311|omp_py311|omp_single|--on-exit|
omp_duplicate_py312|omp_py312|omp_duplicate|--on-exit|
msvcp140_mutex_py311|msvcp140_py311|msvcp140_mutex|--on-exit|WINEDLLOVERRIDES=msvcp140=n,b
two_cuda_runtimes_py311|cuda_py311|two_cuda_runtimes|--on-exit|
cudnn9_shim_abort_py311|cuda_py311|cudnn9_shim_abort|--on-exit|
"
wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then
  mapfile -t wanted < <(echo "$SCENARIOS" | awk -F'|' 'NF>1{print $1}')
fi
for s in "${wanted[@]}"; do
  echo "$SCENARIOS" | grep -q "^$s|" || { echo "unknown scenario: $s" >&2; exit 2; }
done
test -f "$DUMPER" || { echo "missing $DUMPER (build ../build.sh first)" >&2; exit 2; }
start=$(date +%s)

# 1. the wheels, pinned
mkdir -p "$WHEELS"
for req in py311:3.11 legacy-py311:3.11 py312:3.12; do
  timeout 900 pip download --only-binary=:all: --platform win_amd64 \
    --python-version "${req#*:}" --no-deps --require-hashes \
    -r "requirements-${req%%:*}.txt" -d "$WHEELS" 2>&1 | grep -E "^(Saved|Successfully|ERROR)" || true
done

wheel_file() {  # the cached wheel of PREFIX for python version V (311/312)
  local f
  f=$(ls "$WHEELS/$1"-cp"$2"-*.whl "$WHEELS/$1"-py*.whl 2>/dev/null | head -1 || true)
  test -n "$f" || { echo "no wheel $1 for cp$2 in $WHEELS" >&2; exit 2; }
  echo "$f"
}

# 2. interpreter folders and the prefix
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  timeout 300 "$WINE" wineboot -i </dev/null 2>&1 | cat >/dev/null || true
fi
C=$WINEPREFIX/drive_c
mkdir -p "$C/scripts" "$C/apps" "$CACHE/envs"
needed_envs=$(for s in "${wanted[@]}"; do echo "$SCENARIOS" | grep "^$s|" | cut -d'|' -f2; done | sort -u)
for env in $needed_envs; do
  IFS='|' read -r _ ver _ wheels <<<"$(echo "$ENVS" | grep "^$env|")"
  dir=$CACHE/envs/$env
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir" "$dir.legacy"
    src=$SHARED/cpython-${ver:0:1}.${ver:1}-amd64
    test -f "$src/python$ver.dll" || { echo "missing $src" >&2; exit 2; }
    mkdir -p "$dir" && cp -r "$src/." "$dir/" && chmod -R u+w "$dir"
    files=()
    for w in $wheels; do files+=("$(wheel_file "$w" "$ver")"); done
    python3 src/install_wheel.py "$dir" "${files[@]}" | cut -c1-160
    legacy=$(echo "$LEGACY" | grep "^$env|" || true)
    if [ -n "$legacy" ]; then
      files=()
      for w in $(echo "$legacy" | cut -d'|' -f3); do files+=("$(wheel_file "$w" "$ver")"); done
      python3 src/install_wheel.py --target "$dir.legacy" "${files[@]}" | cut -c1-160
    fi
    touch "$dir/.complete"
  fi
done
cp src/*.py "$C/scripts/"

# 3. the scenarios
mkdir -p logs "$CACHE/raw-dumps"
for s in "${wanted[@]}"; do
  IFS='|' read -r name env script opts extra <<<"$(echo "$SCENARIOS" | grep "^$s|")"
  ver=$(echo "$ENVS" | grep "^$env|" | cut -d'|' -f2)
  ln -sfn "$CACHE/envs/$env" "$C/Python$ver"
  if [ -d "$CACHE/envs/$env.legacy" ]; then ln -sfn "$CACHE/envs/$env.legacy" "$C/apps/legacy"
  else rm -f "$C/apps/legacy"; fi
  out="$HERE/$name.dmp"
  rm -f "$out" "$out.xz"
  envs=(KMP_AFFINITY=disabled)
  [ -n "$extra" ] && read -r -a more <<<"$extra" && envs+=("${more[@]}")
  echo "== $name (C:\\Python$ver = envs/$env; ${envs[*]}; dumper $opts C:\\scripts\\$script.py)"
  t0=$(date +%s.%N)
  # stdin /dev/null and stdout a pipe: python.exe dies in init_sys_streams otherwise
  # shellcheck disable=SC2086
  (cd "$C/scripts" && env "${envs[@]}" timeout 600 "$WINE" "$DUMPER" "Z:${out//\//\\}" $opts \
     "C:\\Python$ver\\python.exe" "C:\\scripts\\$script.py" </dev/null 2>&1 | cat) \
     > "logs/$name.log" || true
  t1=$(date +%s.%N)
  {
    echo "environment $env ${envs[*]}"
    echo "elapsed_seconds $(python3 -c "print(round($t1 - $t0, 1))")"
  } >> "logs/$name.log"
  cat "logs/$name.log"
  timeout 60 "$WINESERVER" -k 2>/dev/null || true
  test -s "$out" || { echo "no dump for $name" >&2; exit 1; }
  # 4. keep the raw dump, compress what is over 2 MB
  cp "$out" "$CACHE/raw-dumps/$name.dmp"
  stat -c 'raw_bytes %s' "$out" >> "logs/$name.log"
  if [ "$(stat -c %s "$out")" -gt 2000000 ]; then
    t0=$(date +%s.%N)
    timeout 1200 xz -9 -T2 -f "$out"
    t1=$(date +%s.%N)
    echo "xz_seconds $(python3 -c "print(round($t1 - $t0, 1))") xz_bytes $(stat -c %s "$out.xz")" >> "logs/$name.log"
  fi
done

# 5. the manifest
timeout 900 python3 src/facts.py --logs logs --envs "$CACHE/envs" --raw "$CACHE/raw-dumps" \
  --manifest manifest.json .
echo "build.sh: $(( $(date +%s) - start )) s"
ls -la
du -sh .
