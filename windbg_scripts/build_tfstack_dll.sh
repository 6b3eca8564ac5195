#!/bin/sh
# Builds tfstack.dll (x64) from tfstack.c with mingw-w64; the result is committed next to
# it so users need no compiler. Reproducible: no timestamp, stripped, same flags.
#   Debian: apt-get install gcc-mingw-w64-x86-64
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/tfstack.dll"}
x86_64-w64-mingw32-gcc -shared -O2 -s -Wall -Wextra -Wno-unused-parameter \
    -Wl,--no-insert-timestamp -Wl,--build-id=none -Wl,--image-base=0x1c0000000 -Wl,--dynamicbase -static-libgcc \
    -o "$out" "$here/tfstack.c" -ladvapi32
