#!/bin/sh
# tests/install/check-symbols.sh LIB SRCDIR - every global symbol libweft.a defines is either
# public API (weft_..., declared in include/weft/) or internal (weft__..., libuv's uv__
# convention). Anything else could clash with a symbol of the program that links weft.
set -eu
lib=$1
src=$2
syms=$(nm -g --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort -u)
[ -n "$syms" ] || { echo "no symbols read from $lib" >&2; exit 1; }
echo "$syms" | grep -qx weft_run || { echo "weft_run missing from $lib" >&2; exit 1; }
status=0
for s in $syms; do
    case $s in
    weft__*) ;;
    __odr_asan*) ;; # AddressSanitizer's ODR indicators for weft's own globals (sanitizer builds)
    weft_*)
        if ! grep -qw "$s" "$src"/include/weft/*.h; then
            echo "$s: public-looking symbol not declared in include/weft/ (make it static or weft__)" >&2
            status=1
        fi
        ;;
    *)
        echo "$s: global symbol without the weft_/weft__ prefix" >&2
        status=1
        ;;
    esac
done
[ $status -eq 0 ] && echo "$(echo "$syms" | wc -l) global symbols, all weft_ (public) or weft__ (internal)"
exit $status
