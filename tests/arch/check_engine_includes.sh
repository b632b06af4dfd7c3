#!/bin/sh
# Only the engine (runtime/engine.c and its parts, runtime/engine_*.c) and the CLI (cli/) may
# include runtime/engine.h: every other
# module reaches the engine through the run services of runtime/run.h (docs/ARCHITECTURE.md).
# Usage: check_engine_includes.sh SOURCE_DIR. Exit 1 listing the offenders.
set -eu
src=${1:?source directory}
cd "$src"
bad=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*/)?engine\.h"' \
    --include='*.c' --include='*.h' runtime tracing exporters include 2>/dev/null |
    grep -vE '^runtime/engine(_[a-z]+)?\.c$' || true)
if [ -n "$bad" ]; then
    echo "these files include engine.h (only runtime/engine.c, runtime/engine_*.c and cli/ may):"
    echo "$bad"
    exit 1
fi
# The check itself must see the one include it allows, or it is looking in the wrong place.
grep -qE '^#include "engine\.h"' runtime/engine.c || {
    echo "runtime/engine.c does not include engine.h: the check is out of date"
    exit 1
}
echo "engine.h is included by runtime/engine.c and its parts only"
