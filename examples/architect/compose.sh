#!/bin/sh
# examples/architect/compose.sh - the architect designs a team for a goal (its first design is
# sent back: one agent was bound to two tools), then the composed team runs. Offline: the
# scripted provider answers for the architect and for the team.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
weft=${WEFT_BIN:-$here/../../build/weft}
out=${OUT:-$here/teams}
"$weft" compose "Build me a team that researches stocks and writes a Python report" \
    --workflow "$here/workflow.json" --out "$out"
"$weft" validate --offline "$out/stock_report_team.json"
"$weft" run "$out/stock_report_team.json" --input "ACME"
