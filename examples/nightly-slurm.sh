#!/usr/bin/env bash
#SBATCH --job-name=fusediff-nightly
#SBATCH --array=0-7
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --output=fusediff-nightly-%A_%a.log
# fusediff's nightly run as a Slurm job array. Each array task runs one shard: `fusediff run` takes it from
# SLURM_ARRAY_TASK_ID (relative to SLURM_ARRAY_TASK_MIN) of SLURM_ARRAY_TASK_COUNT, so the 8 tasks of
# --array=0-7 above are shards 0/8 .. 7/8. Each writes its part to a folder the compute nodes share. One job that
# depends on the whole array then merges the parts (refused, exit 2, when a shard is missing), publishes the
# sign-off report, compares against the baseline and promotes tonight's results when nothing regressed.
#
# Submit from a login node, e.g. from cron every night (the folder must be shared with the compute nodes):
#   bash examples/nightly-slurm.sh            # = submit: the array (this file) and the dependent merge job
# Steps, as the jobs run them:  nightly-slurm.sh part  |  nightly-slurm.sh merge ARRAY_JOB_ID (which runs
# examples/nightly.sh --parts on the array's parts: this folder must be on the shared file system too).
# Environment (exported to the jobs): FUSEDIFF (binary, default "fusediff"), STATE (shared folder for parts,
# baseline and reports, default ./nightly), RUN_ARGS (extra `run` options, e.g. "--samples 10000000"),
# RULES (optional compare rules JSON, docs/reports.md), SBATCH (submit command, default "sbatch").
set -euo pipefail
fusediff=${FUSEDIFF:-fusediff}
state=${STATE:-./nightly}

case ${1:-submit} in
  submit)
    mkdir -p "$state"
    STATE=$(cd "$state" && pwd) && export STATE  # the jobs may start elsewhere
    script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    array=$("${SBATCH:-sbatch}" --parsable "$script" part)
    array=${array%%;*}  # --parsable prints JOBID[;CLUSTER]
    # afterany, not afterok: the merge itself says which shard is missing when a task did not finish.
    merge=$("${SBATCH:-sbatch}" --parsable --dependency="afterany:$array" --job-name=fusediff-nightly-merge \
      --output="$STATE/fusediff-nightly-merge-%j.log" --wrap "bash '$script' merge $array")
    echo "nightly: submitted the shards as array job $array and the merge as job ${merge%%;*}"
    ;;

  part)
    parts=$state/parts-$SLURM_ARRAY_JOB_ID
    mkdir -p "$parts"
    threads=()  # the task's CPUs, not the node's; for oneDNN's OpenMP pool too
    [[ " ${RUN_ARGS:-} " == *" --threads "* ]] || threads=(--threads "${SLURM_CPUS_PER_TASK:-1}")
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
    status=0
    # shellcheck disable=SC2086
    "$fusediff" run --seed 1 ${RUN_ARGS:-} "${threads[@]}" --json "$parts/part-$SLURM_ARRAY_TASK_ID.json" \
      || status=$?
    # Exit 1 (some case fails its tolerance) is a result like any other: the merge and compare judge it.
    exit $(( status == 1 ? 0 : status ))
    ;;

  merge)
    parts=$state/parts-${2:?merge: expected the array job id}
    # Merge (exactly shards 0..N-1 of one run, else exit 2 naming what is missing or doubled), publish the
    # sign-off report, compare against the baseline and promote: examples/nightly.sh on the parts.
    status=0
    bash "$(dirname "$0")/nightly.sh" --parts "$parts" || status=$?
    if (( status < 2 )); then rm -rf "$parts"; fi  # merged into $STATE/current.json
    exit "$status"
    ;;

  *)
    echo "nightly: $1: unknown step (expected submit, part or merge ARRAY_JOB_ID)" >&2
    exit 2
    ;;
esac
