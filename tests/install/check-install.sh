#!/bin/sh
# tests/install/check-install.sh BUILD_DIR SOURCE_DIR COMPILE - `cmake --install --prefix` into
# a temporary directory must give a weft.pc that points inside it (not at the configure-time
# prefix), and a program must build against the installed files with pkg-config alone.
# COMPILE=0 skips the compile step (sanitizer builds need their own runtime flags).
set -eu
build=$1
src=$2
compile=${3:-1}
tmp=$(mktemp -d /tmp/weft-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name weft.pc)
test -n "$pc" || { echo "no weft.pc installed"; exit 1; }
grep -qx "prefix=$tmp/prefix" "$pc" || { echo "weft.pc has the wrong prefix:"; cat "$pc"; exit 1; }

export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs weft)
case "$flags" in
*"-I$tmp/prefix/include"*"-L$tmp/prefix/"*) ;;
*) echo "pkg-config --cflags --libs weft points outside the prefix: $flags"; exit 1 ;;
esac
test -f "$tmp/prefix/include/weft/weft.h" || { echo "headers not installed"; exit 1; }

if [ "$compile" = 1 ]; then
    # shellcheck disable=SC2086 # the flags are a word list
    cc -std=c11 -o "$tmp/quickstart" "$src/examples/trace_quickstart.c" $flags
    libdir=$(pkg-config --variable=libdir weft)
    mkdir -p "$tmp/home"
    LD_LIBRARY_PATH=$libdir WEFT_HOME=$tmp/home OTEL_TRACES_EXPORTER=store "$tmp/quickstart" \
        >/dev/null
fi
echo "install ok: $pc"
