#!/bin/sh
# Only the engine's own files (runtime/engine/) and the CLI (cli/) may include
# runtime/engine/engine.h: every other module reaches the engine through the run services of
# runtime/run/run.h (docs/ARCHITECTURE.md).
# Usage: check_engine_includes.sh SOURCE_DIR. Exit 1 listing the offenders.
set -eu
src=${1:?source directory}
cd "$src"
bad=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*/)?engine\.h"' \
    --include='*.c' --include='*.h' runtime tracing exporters store report serve include \
    2>/dev/null | grep -vE '^runtime/engine/[a-z_]+\.[ch]$' || true)
if [ -n "$bad" ]; then
    echo "these files include engine.h (only runtime/engine/ and cli/ may):"
    echo "$bad"
    exit 1
fi
# The check itself must see the one include it allows, or it is looking in the wrong place.
grep -qE '^#include "runtime/engine/engine\.h"' runtime/engine/engine.c || {
    echo "runtime/engine/engine.c does not include runtime/engine/engine.h: the check is out of date"
    exit 1
}
echo "engine.h is included by runtime/engine/ only"
