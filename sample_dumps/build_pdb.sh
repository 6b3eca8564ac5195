#!/bin/bash
# Rebuild the PDB samples: pdbhost.exe + pdbkernels.dll compiled by clang and linked by
# lld for the mingw target WITH CodeView PDBs, crashed under Wine through bin/dumper.exe
# (built by build.sh). Their recursion and fail-fast run through static functions that
# only the PDBs name (lld writes no COFF symbol table for a PDB build).
#
# Needs (Debian 12), besides build.sh's packages:
#   apt-get install -y --no-install-recommends clang lld
# Used for the committed files: clang 14.0.6 (Debian 1:14.0.6-12), lld 14, mingw-w64 10.0.0
# headers and CRT, libgcc from gcc-mingw-w64-x86-64-win32 12.2.0, Wine 8.0.
#
# The binaries run from a scratch folder that is deleted afterwards, so the paths the dumps
# record (Z:\tmp\dumpkit-pdb-run\...) do not lead to the PDBs: tests find them through
# --image-path / --symbol-path as a user on another machine would. `-pdbaltpath:%_PDB%`
# records the bare PDB name in the CodeView record, not the build folder.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$PWD
. src/wine_env.sh
TARGET=--target=x86_64-w64-windows-gnu
CFLAGS="$TARGET -O2 -fno-inline -fno-optimize-sibling-calls -g -gcodeview -Wall -Wno-infinite-recursion"
LIBGCC=$(dirname "$(x86_64-w64-mingw32-gcc -print-libgcc-file-name)")
LDFLAGS="$TARGET -fuse-ld=lld -L$LIBGCC -static -static-libgcc -g -Wl,-Xlink=-pdbaltpath:%_PDB%"
BUILD=/tmp/dumpkit-pdb-build
RUN=/tmp/dumpkit-pdb-run
rm -rf "$BUILD" "$RUN" bin/pdb && mkdir -p "$BUILD" "$RUN" bin/pdb
cp src/pdbkernels.c src/pdbhost.c "$BUILD"/
( cd "$BUILD"
  timeout 120 clang $CFLAGS -c pdbkernels.c -o pdbkernels.o
  timeout 120 clang $CFLAGS -c pdbhost.c -o pdbhost.o
  timeout 120 clang $LDFLAGS -shared -o pdbkernels.dll pdbkernels.o -Wl,--pdb=pdbkernels.pdb
  timeout 120 clang $LDFLAGS -o pdbhost.exe pdbhost.o -Wl,--pdb=pdbhost.pdb )
cp "$BUILD"/pdbkernels.{dll,pdb} "$BUILD"/pdbhost.{exe,pdb} bin/pdb/
cp "$BUILD"/pdbkernels.dll "$BUILD"/pdbhost.exe bin/dumper.exe "$RUN"/
wine_prefix_ready
cd "$RUN"
for s in pdb_static_cycle pdb_static_fastfail; do
  echo "== $s (pdbhost.exe)"
  rm -f "$HERE/$s.dmp"
  timeout 300 $WINE dumper.exe "Z:${HERE//\//\\}\\$s.dmp" pdbhost.exe "$s"
  test -s "$HERE/$s.dmp"
done
cd "$HERE"
timeout 60 /usr/lib/wine/wineserver -k 2>/dev/null || true
rm -rf "$BUILD" "$RUN"
ls -la bin/pdb pdb_static_*.dmp
