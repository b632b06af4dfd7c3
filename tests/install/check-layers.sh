#!/bin/sh
# tests/install/check-layers.sh SRCDIR - the one-way dependencies of docs/ARCHITECTURE.md, read
# off the #include lines: base/ uses nothing of weft but include/weft/common.h; net/ (HTTP over
# libcurl and libmicrohttpd, shared by exporters/, runtime/ and serve/) uses base/ only; tracing/ uses
# base/ only; store/ (the span store) uses base/ and tracing/ only, so exporters/ and report/
# stand on it and never the other way round; exporters/ and report/ (the renderer the console
# exporter and the CLI share) never include runtime/ or cli/; runtime/ never includes cli/; no
# include climbs with "../".
set -eu
cd "$1"
status=0
bad() {
    echo "$1" >&2
    status=1
}
# file:line:#include "x" lines of one directory's sources, quoted includes only.
quoted() {
    grep -Hn '^#include "' "$1"/*.c "$1"/*.h "$1"/*/*.c "$1"/*/*.h 2>/dev/null || true
}
for line in $(quoted base | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in base/*) ;; *) bad "$(echo "$line" | tr '\001' ' '): base/ may include base/ only" ;; esac
done
for line in $(quoted net | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in base/* | net/*) ;; *) bad "$(echo "$line" | tr '\001' ' '): net/ may include base/ and net/ only" ;; esac
done
for line in $(quoted tracing | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in exporters/* | runtime/* | cli/*)
        bad "$(echo "$line" | tr '\001' ' '): tracing/ may include base/ and tracing/ only" ;;
    esac
done
for line in $(quoted exporters | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in runtime/* | cli/*) bad "$(echo "$line" | tr '\001' ' '): exporters/ may not include runtime/ or cli/" ;; esac
done
for line in $(quoted store | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in runtime/* | cli/* | exporters/* | report/* | serve/*)
        bad "$(echo "$line" | tr '\001' ' '): store/ (the span store) may include base/, tracing/ and store/ only" ;;
    esac
done
for line in $(quoted report | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in runtime/* | cli/*) bad "$(echo "$line" | tr '\001' ' '): report/ may not include runtime/ or cli/" ;; esac
done
for line in $(quoted runtime | tr ' ' '\001'); do
    inc=$(echo "$line" | sed 's/.*#include.\(.*\)/\1/' | tr -d '"')
    case $inc in cli/*) bad "$(echo "$line" | tr '\001' ' '): runtime/ may not include cli/" ;; esac
done
climbs=$(git ls-files '*.c' '*.h' 2>/dev/null | xargs grep -n '^#include "\.\./' 2>/dev/null || true)
[ -z "$climbs" ] || bad "includes that climb with ../ (include by path from the source root):
$climbs"
[ $status -eq 0 ] && echo "layers: base <- net; base <- tracing <- store <- exporters, report; runtime <- cli; no ../ includes"
exit $status
