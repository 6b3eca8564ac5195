#!/bin/bash
# Rebuild msvc_pdb_av.dmp.xz: the genuine CPython 3.8 x64 (../../../shared/winpython) under
# Wine runs src/msvc_pdb_av.py, which calls debugpy's MSVC-built attach_amd64.dll
# (../../tests/symbols/msvc, with its PDB) with a NULL pointer; ../bin/dumper.exe writes the
# dump of the access violation with MiniDumpWriteDump.
# Needs: wine64 (Debian 12: Wine 8.0), xz-utils. Used for the committed dump: Wine 8.0
# (Debian 8.0~repack-4).
# Environment: WINEPREFIX (default: a fresh one under /tmp), WINE (default /usr/lib/wine/wine64).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
WINPY=$REPO/../shared/winpython/cpython-3.8-amd64
test -f "$WINPY/python38.dll" || { echo "missing $WINPY (shared/winpython)" >&2; exit 2; }
export WINEPREFIX=${WINEPREFIX:-$(mktemp -d /tmp/dumpkit-msvc-prefix.XXXXXX)}
export WINEDEBUG=-all PYTHONDONTWRITEBYTECODE=1  # nothing written into ../shared
WINE=${WINE:-/usr/lib/wine/wine64}
[ -f "$WINEPREFIX/system.reg" ] || timeout 300 "$WINE" wineboot -i >/dev/null 2>&1 || true
C=$WINEPREFIX/drive_c
mkdir -p "$C/scripts"
ln -sfn "$WINPY" "$C/Python38"
cp src/msvc_pdb_av.py "$REPO/tests/symbols/msvc/attach_amd64.dll" "$C/scripts/"
rm -f msvc_pdb_av.dmp msvc_pdb_av.dmp.xz
# stdin /dev/null and stdout a pipe: python.exe dies in init_sys_streams otherwise
(cd "$C/scripts" && timeout 300 "$WINE" "$REPO/sample_dumps/bin/dumper.exe" "Z:${HERE//\//\\}\\msvc_pdb_av.dmp" \
  'C:\Python38\python.exe' 'C:\scripts\msvc_pdb_av.py' </dev/null 2>&1 | cat) | tee msvc_pdb_av.log
timeout 60 "${WINE%wine64}wineserver" -k 2>/dev/null || true
test -s msvc_pdb_av.dmp
xz -9 -f msvc_pdb_av.dmp
ls -la
