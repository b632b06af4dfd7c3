#!/bin/sh
# tests/fuzz/run-fuzz.sh BINARY NAME SECONDS SOURCE_DIR WORK_DIR
# Run one libFuzzer harness for SECONDS over its seed corpus (SOURCE_DIR/corpus/NAME, read
# only) plus a scratch corpus (WORK_DIR/corpus/NAME, where new inputs go), with ASan (leak
# detection on) and UBSan. Crash inputs land in WORK_DIR/artifacts/NAME/. Prints one summary
# line: executions, coverage (cov: edges, ft: features), corpus size; the exit status is the
# harness's (non-zero on a crash, a leak, a timeout or running out of memory).
set -u
bin=$1 name=$2 secs=$3 src=$4 work=$5

seeds=$src/corpus/$name
scratch=$work/corpus/$name
artifacts=$work/artifacts/$name
log=$work/logs/$name.log
mkdir -p "$scratch" "$artifacts" "$work/logs" "$work/tmp"
set -- -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$artifacts/"
if [ -f "$src/dict/$name.dict" ]; then
    set -- "$@" -dict="$src/dict/$name.dict"
fi
# Harnesses write only below TMPDIR (tests/fuzz/fuzz_util.h).
TMPDIR=$work/tmp \
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" "$@" "$scratch" "$seeds" >"$log" 2>&1
rc=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
cov=$(echo "$done_line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
ft=$(echo "$done_line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
corp=$(echo "$done_line" | sed -n 's/.*corp: \([0-9]*\).*/\1/p')
printf 'fuzz %-18s execs=%s cov=%s ft=%s corpus=%s seconds=%s status=%s\n' "$name" \
    "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$secs" \
    "$([ $rc -eq 0 ] && echo ok || echo "FAILED($rc)")"
if [ $rc -ne 0 ]; then
    echo "--- last lines of $log:"
    tail -n 60 "$log"
    echo "--- crash inputs: $(ls "$artifacts" 2>/dev/null | tr '\n' ' ')"
fi
exit $rc
