#!/usr/bin/env bash
# Runs examples/nightly.sh twice in a scratch folder (first night: baseline created; second night: compared,
# no regression, promoted), once with --shards 3 (three local processes merged: the same results, promoted),
# then once with a mutant (regression: exit 1, baseline kept).
# Usage: nightly_test.sh NIGHTLY_SCRIPT FUSEDIFF_BINARY WORK_DIR
set -euo pipefail
script=$1
export FUSEDIFF=$2 STATE=$3/state
rm -rf "$3" && mkdir -p "$3"
unset GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE \
  JOB_COMPLETION_INDEX FUSEDIFF_SHARD_COUNT SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_STEP
export RUN_ARGS="--activation hard_swish --samples 2000"

bash "$script" > "$3/night1.txt"
grep -q "no baseline yet" "$3/night1.txt" || { echo "FAIL: first night did not create the baseline" >&2; exit 1; }
bash "$script" > "$3/night2.txt"
grep -q "baseline promoted" "$3/night2.txt" || { echo "FAIL: second night did not promote" >&2; cat "$3/night2.txt"; exit 1; }
for f in signoff.html signoff.md junit.xml compare.txt; do
  [[ -s "$STATE/publish/$f" ]] || { echo "FAIL: $f not published" >&2; exit 1; }
done
cp "$STATE/current.json" "$3/unsharded.json"
bash "$script" --shards 3 > "$3/night_sharded.txt"
grep -q "baseline promoted" "$3/night_sharded.txt" || { echo "FAIL: the sharded night did not promote" >&2; cat "$3/night_sharded.txt"; exit 1; }
for i in 0 1 2; do [[ -s "$STATE/parts/part-$i.json" ]] || { echo "FAIL: part $i missing" >&2; exit 1; }; done
# The merged parts are the unsharded night's results, apart from when and how the file was made.
/usr/bin/python3 - "$3/unsharded.json" "$STATE/current.json" <<'PY'
import json, sys
whole, merged = (json.load(open(path)) for path in sys.argv[1:])
for j in (whole, merged):
    for key in ("created", "command_line"):
        del j[key]
assert merged["shard"].pop("source") == "merge" and whole["shard"].pop("source") == "none"
assert whole == merged, "the merged shards differ from the unsharded run"
PY
set +e
bash "$script" --shards 0 > "$3/bad_shards.txt" 2>&1
code=$?
set -e
[[ $code -eq 2 ]] || { echo "FAIL: --shards 0 exited $code, expected 2" >&2; exit 1; }
set +e
bash "$script" --parts "$3/no-such-folder" > "$3/bad_parts.txt" 2>&1
code=$?
set -e
[[ $code -eq 2 ]] || { echo "FAIL: --parts of a missing folder exited $code, expected 2" >&2; exit 1; }
before=$(sha256sum < "$STATE/baseline.json")
export RUN_ARGS="--activation hard_swish --samples 2000 --max-abs-lsb 0"
set +e
bash "$script" > "$3/night3.txt" 2>&1
code=$?
set -e
after=$(sha256sum < "$STATE/baseline.json")
[[ $code -eq 1 ]] || { echo "FAIL: a regression night exited $code, expected 1" >&2; cat "$3/night3.txt"; exit 1; }
[[ "$before" == "$after" ]] || { echo "FAIL: the baseline was promoted despite a regression" >&2; exit 1; }
echo "nightly loop: baseline created, promoted (unsharded and --shards 3), and kept on regression"
