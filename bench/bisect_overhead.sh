#!/usr/bin/env bash
# fusediff's own overhead in `fusediff bisect` (issue 14's target: under 20 % of the bisect's wall time), on the
# exported demo models and two patterns. The wall time is the whole `fusediff bisect` process's, from before exec to
# after exit (bash's EPOCHREALTIME: no subprocess inside the span), so it includes fusediff's start (exec, loading its
# shared libraries) and exit; the overhead is that wall time less the time spent inside ONNX Runtime's own calls
# (timing.inside_onnxruntime_s in each JSON: loading the library and creating its environment; creating, running
# and releasing sessions and every other API call, each timed around the call alone; releasing the environment).
# Everything else is overhead: fusediff's start, its own work, writing the JSON, its exit; with the Node runner
# (FUSEDIFF_ORT_RUNTIME=node) also node's start-up and exit, JSON and base64 and the pipe. Each model runs RUNS times
# (default 5): the verdict is on the median run; the in-process column is the JSON's own figure (the bisect from
# starting the runtime to closing it, without the process's start and exit).
#   bash bench/bisect_overhead.sh [BUILD_DIR] [KEEP_DIR]   (default build/; needs scripts/setup.sh's ONNX Runtime;
#                                                           KEEP_DIR: keep each model's last bisect JSON there)
set -euo pipefail
build="${1:-build}"
keep="${2:-}"
runs="${RUNS:-5}"
fusediff="$build/fusediff"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$fusediff" export-onnx --out-dir "$work/models" --scales general >/dev/null
status=0
printf '%-22s %9s %9s %11s %9s  %s\n' model process_s in_ort_s in_process overhead target
for model in twin_causes resnet_block_qdq resnet_block_float conv2d_add_act_relu fc_act_gelu_erf; do
  : >"$work/$model.runs"
  for ((i = 0; i < runs; ++i)); do
    start=$EPOCHREALTIME  # bash 5: no subprocess inside the measured span
    "$fusediff" bisect "$work/models/$model/model.onnx" --json "$work/$model.json" >/dev/null || true  # 1: a blacklist
    end=$EPOCHREALTIME
    python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))["timing"]; print(float(sys.argv[3]) - float(sys.argv[2]), t["inside_onnxruntime_s"], t["fusediff_overhead"])' \
      "$work/$model.json" "$start" "$end" >>"$work/$model.runs"
  done
  [[ -z "$keep" ]] || { mkdir -p "$keep"; cp "$work/$model.json" "$keep/$model.json"; }
  python3 - "$work/$model.runs" "$model" <<'PY' || status=1
import sys
runs = [tuple(map(float, line.split())) for line in open(sys.argv[1])]
runs.sort(key=lambda r: (r[0] - r[1]) / r[0])  # by whole-process overhead
process, inside, in_process = runs[len(runs) // 2]
overhead = (process - inside) / process
verdict = 'PASS' if overhead < 0.20 else 'FAIL'
all_runs = ' '.join(f'{100 * (p - i) / p:.1f}' for p, i, _ in runs)
print(f"{sys.argv[2]:<22} {process:9.3f} {inside:9.3f} {100 * in_process:10.1f}% {100 * overhead:8.1f}%  {verdict}  (runs: {all_runs})")
sys.exit(0 if verdict == 'PASS' else 1)
PY
done
exit $status
