#!/bin/sh
# scripts/longfn.sh [N] - list the C functions of the library, CLI, benches and examples longer
# than N lines (default 80) as file:function:lines, longest first. A function counts from the
# line that starts with its name to the closing brace in column 0 (the project's style).
max=${1:-80}
cd "$(dirname "$0")/.." || exit 1
for f in $(git ls-files '*.c' | grep -v '^tests/'); do
    awk -v f="$f" -v max="$max" '
    /^[A-Za-z_][A-Za-z0-9_]*\(/ { name = $0; sub(/\(.*/, "", name); start = NR; infn = 1; next }
    infn && /^}/ { n = NR - start; if (n > max) print f ":" name ":" n; infn = 0 }
    ' "$f"
done | sort -t: -k3 -nr
