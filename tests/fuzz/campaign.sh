#!/bin/bash
# A long coverage-guided campaign: WORKERS atheris processes sharing one corpus folder
# (libFuzzer reloads what the others add), each restarted after a finding, until SECONDS
# have passed. libFuzzer's own -fork/-jobs re-execute argv[0], which does not work for a
# Python harness, hence plain processes.
#
#   tests/fuzz/campaign.sh SECONDS [WORKERS] [DIR]      (defaults: 2 workers, /tmp/dumpkit-fuzz)
#
# MAX_LENS="16384 131072" gives the workers those -max_len values in turn (default: all
# 131072). Short inputs run ~3.5x faster (header, directory, lists and small real dumps);
# long ones keep Wine dumps' thousands of memory ranges and real stacks in play.
#
# Findings: DIR/w<N>/crash-*, timeout-*, slow-unit-*; logs: DIR/w<N>.run<K>.log. Totals:
#   grep -h number_of_executed_units DIR/w*.log | awk '{s+=$2} END {print s}'
# Open + walk + analyze + JSON only (DUMPKIT_FUZZ_FORMATS=json): the renderers' escaping
# is what tests/hostile covers, and they cost most of an execution.
set -u
seconds=${1:?usage: campaign.sh SECONDS [WORKERS] [DIR]}
workers=${2:-2}
dir=${3:-/tmp/dumpkit-fuzz}
root=$(cd "$(dirname "$0")/../.." && pwd)
deadline=$(( $(date +%s) + seconds ))
mkdir -p "$dir/corpus"

read -r -a lens <<< "${MAX_LENS:-131072}"

worker() {
  local w=$1 run=0
  local max_len=${lens[$(( (w - 1) % ${#lens[@]} ))]}
  mkdir -p "$dir/w$w"
  while :; do
    local left=$(( deadline - $(date +%s) ))
    [ "$left" -lt 30 ] && break
    run=$((run + 1))
    DUMPKIT_FUZZ_FORMATS=json python "$root/tests/fuzz/harness.py" -seed=$((w * 1000 + run)) \
      -max_total_time="$left" -timeout=20 -rss_limit_mb=1500 -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix="$dir/w$w/" "$dir/corpus" > "$dir/w$w.run$run.log" 2>&1
    # A run that never started fuzzing (no atheris in this Python, a broken import) would
    # otherwise be restarted in a tight loop until the deadline.
    if ! grep -q INITED "$dir/w$w.run$run.log"; then
      echo "worker $w: run $run did not start fuzzing; see $dir/w$w.run$run.log" >&2
      tail -3 "$dir/w$w.run$run.log" >&2
      break
    fi
  done
}

for w in $(seq 1 "$workers"); do worker "$w" & done
wait
grep -h number_of_executed_units "$dir"/w*.log | awk '{s += $2} END {print "executions:", s}'
ls "$dir"/w*/ 2>/dev/null
