# Wine settings shared by build.sh and build_pdb.sh (sourced from sample_dumps/).
export WINEPREFIX=${WINEPREFIX:-/tmp/wineprefix-dumpkit}
export WINEDEBUG=-all
WINE=${WINE:-/usr/lib/wine/wine64}

wine_prefix_ready() { # a fresh prefix on first use; Wine can hang, so under timeout
  if [ ! -d "$WINEPREFIX" ]; then
    timeout 300 $WINE wineboot -i >/dev/null 2>&1 || true
  fi
}
