#!/usr/bin/env bash
# The nightly accuracy loop, using only the fusediff CLI:
#   1. run the suite (same seed every night -> same samples, so differences are real),
#   2. compare against the stored baseline (exit 1 = regression, 2 = bad input),
#   3. publish the sign-off report (HTML + Markdown) and JUnit XML,
#   4. promote tonight's results to baseline when nothing regressed.
# Usage: nightly.sh [--shards N | --parts DIR]
#   --shards N  runs the suite as N shards in N local processes (fusediff run --shard I/N, each with nproc/N
#               worker threads unless RUN_ARGS sets --threads, and as many OpenMP threads for oneDNN unless
#               OMP_NUM_THREADS is set) and merges them: the flow of the Kubernetes and
#               Slurm examples (examples/nightly-kubernetes.yaml, examples/nightly-slurm.sh) on one machine.
#   --parts DIR merges the parts a scheduler wrote to DIR (part-*.json) instead of running; a missing or
#               doubled shard is refused (exit 2). examples/nightly-slurm.sh ends with this.
# Environment: FUSEDIFF (binary, default "fusediff"), STATE (folder holding baseline.json, default ./nightly),
# PUBLISH (report folder, default $STATE/publish), RUN_ARGS (extra `run` options, e.g. "--samples 200000"),
# RULES (optional compare rules JSON, docs/reports.md).
set -euo pipefail
shards=1 parts=
while (( $# > 0 )); do
  case $1 in
    --shards) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "nightly: --shards: expected a count N >= 1, got '${2:-}'" >&2; exit 2; }
              shards=$2; shift 2 ;;
    --parts) [[ -d ${2:-} ]] || { echo "nightly: --parts: expected a folder of parts, got '${2:-}'" >&2; exit 2; }
             parts=$2; shift 2 ;;
    *) echo "nightly: $1: unknown option (expected --shards N or --parts DIR)" >&2; exit 2 ;;
  esac
done
[[ -z $parts ]] || (( shards == 1 )) || { echo "nightly: --shards and --parts: expected one of them" >&2; exit 2; }
fusediff=${FUSEDIFF:-fusediff}
state=${STATE:-./nightly}
publish=${PUBLISH:-$state/publish}
mkdir -p "$state" "$publish"

# 1. Run (or merge the parts). Exit 1 (some case fails its tolerance) is still a result to compare and publish.
run_status=0
if (( shards > 1 )); then
  parts=$state/parts
  rm -rf "$parts" && mkdir -p "$parts"
  per_part=$(( $(nproc) / shards > 0 ? $(nproc) / shards : 1 ))
  threads=()
  [[ " ${RUN_ARGS:-} " == *" --threads "* ]] || threads=(--threads "$per_part")
  # oneDNN's OpenMP pool is per process and sized to the machine: N of them oversubscribe it (results do not
  # depend on it; the time does, docs/reports.md).
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$per_part}
  pids=()
  for (( i = 0; i < shards; i++ )); do
    # shellcheck disable=SC2086
    "$fusediff" run --seed 1 ${RUN_ARGS:-} "${threads[@]}" --shard "$i/$shards" --json "$parts/part-$i.json" \
      > "$parts/run-$i.txt" 2>&1 &
    pids+=($!)
  done
  for (( i = 0; i < shards; i++ )); do
    part_status=0
    wait "${pids[$i]}" || part_status=$?
    if (( part_status >= 2 )); then
      echo "nightly: shard $i/$shards failed with exit $part_status:" >&2; cat "$parts/run-$i.txt" >&2; run_status=$part_status
    fi
  done
fi
if (( run_status >= 2 )); then
  :  # a shard failed: nothing to merge
elif [[ -n $parts ]]; then
  shopt -s nullglob
  files=("$parts"/part-*.json)
  shopt -u nullglob
  (( ${#files[@]} > 0 )) || { echo "nightly: no parts (part-*.json) in $parts" >&2; exit 2; }
  "$fusediff" merge "${files[@]}" --out "$state/current.json" --junit "$publish/junit.xml" \
    > "$publish/run.txt" || run_status=$?
else
  # shellcheck disable=SC2086
  "$fusediff" run --seed 1 ${RUN_ARGS:-} --json "$state/current.json" --junit "$publish/junit.xml" \
    > "$publish/run.txt" || run_status=$?
fi
if (( run_status >= 2 )); then echo "nightly: ${parts:+merging the }run failed with exit $run_status" >&2; exit "$run_status"; fi

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
