#!/usr/bin/env bash
# The nightly accuracy loop, using only the fusediff CLI:
#   1. run the suite (same seed every night -> same samples, so differences are real),
#   2. compare against the stored baseline (exit 1 = regression, 2 = bad input),
#   3. publish the sign-off report (HTML + Markdown) and JUnit XML,
#   4. promote tonight's results to baseline when nothing regressed.
# Environment: FUSEDIFF (binary, default "fusediff"), STATE (folder holding baseline.json, default ./nightly),
# PUBLISH (report folder, default $STATE/publish), RUN_ARGS (extra `run` options, e.g. "--samples 200000"),
# RULES (optional compare rules JSON, docs/reports.md).
set -euo pipefail
fusediff=${FUSEDIFF:-fusediff}
state=${STATE:-./nightly}
publish=${PUBLISH:-$state/publish}
mkdir -p "$state" "$publish"

# 1. Run. Exit 1 (some case fails its tolerance) is still a result to compare and publish.
# shellcheck disable=SC2086
"$fusediff" run --seed 1 ${RUN_ARGS:-} --json "$state/current.json" --junit "$publish/junit.xml" \
  > "$publish/run.txt" || run_status=$?
run_status=${run_status:-0}
if (( run_status >= 2 )); then echo "nightly: run failed with exit $run_status" >&2; exit "$run_status"; fi

# 3. Publish whatever happened.
"$fusediff" report "$state/current.json" --html "$publish/signoff.html" --md "$publish/signoff.md"

# 2. Compare (the first night has no baseline: it becomes one).
if [[ ! -f "$state/baseline.json" ]]; then
  echo "nightly: no baseline yet; promoting tonight's results"
  cp "$state/current.json" "$state/baseline.json.tmp" && mv "$state/baseline.json.tmp" "$state/baseline.json"
  exit "$run_status"
fi
compare_status=0
"$fusediff" compare "$state/baseline.json" "$state/current.json" ${RULES:+--rules "$RULES"} \
  > "$publish/compare.txt" || compare_status=$?
cat "$publish/compare.txt"
if (( compare_status != 0 )); then
  echo "nightly: regression against the baseline (exit $compare_status); baseline kept" >&2
  exit "$compare_status"
fi

# 4. Promote (rename: a reader never sees a half-written baseline).
cp "$state/current.json" "$state/baseline.json.tmp" && mv "$state/baseline.json.tmp" "$state/baseline.json"
echo "nightly: no regression; baseline promoted"
exit "$run_status"
