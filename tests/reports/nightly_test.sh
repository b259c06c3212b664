#!/usr/bin/env bash
# Runs examples/nightly.sh twice in a scratch folder (first night: baseline created; second night: compared,
# no regression, promoted), then once with a mutant (regression: exit 1, baseline kept).
# Usage: nightly_test.sh NIGHTLY_SCRIPT FUSEDIFF_BINARY WORK_DIR
set -euo pipefail
script=$1
export FUSEDIFF=$2 STATE=$3/state
rm -rf "$3" && mkdir -p "$3"
unset GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE
export RUN_ARGS="--activation hard_swish --samples 2000"

bash "$script" > "$3/night1.txt"
grep -q "no baseline yet" "$3/night1.txt" || { echo "FAIL: first night did not create the baseline" >&2; exit 1; }
bash "$script" > "$3/night2.txt"
grep -q "baseline promoted" "$3/night2.txt" || { echo "FAIL: second night did not promote" >&2; cat "$3/night2.txt"; exit 1; }
for f in signoff.html signoff.md junit.xml compare.txt; do
  [[ -s "$STATE/publish/$f" ]] || { echo "FAIL: $f not published" >&2; exit 1; }
done
before=$(sha256sum < "$STATE/baseline.json")
export RUN_ARGS="--activation hard_swish --samples 2000 --max-abs-lsb 0"
set +e
bash "$script" > "$3/night3.txt" 2>&1
code=$?
set -e
after=$(sha256sum < "$STATE/baseline.json")
[[ $code -eq 1 ]] || { echo "FAIL: a regression night exited $code, expected 1" >&2; cat "$3/night3.txt"; exit 1; }
[[ "$before" == "$after" ]] || { echo "FAIL: the baseline was promoted despite a regression" >&2; exit 1; }
echo "nightly loop: baseline created, promoted, and kept on regression"
