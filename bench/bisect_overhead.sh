#!/usr/bin/env bash
# fusediff's own overhead in `fusediff bisect` (issue 14's target: under 20 % of the bisect's wall time), on the
# exported demo models and two patterns. The wall time is the whole `fusediff bisect` process's, from before exec to
# after exit (bash's EPOCHREALTIME: no subprocess inside the span); the overhead is that wall time less the time
# spent inside ONNX Runtime's own calls (timing.inside_onnxruntime_s in each JSON: loading the library and creating
# its environment, creating, running and releasing sessions, each timed around the call alone). Everything else is
# overhead: fusediff's start, its own work, writing the JSON, its exit; with the Node runner (FUSEDIFF_ORT_RUNTIME=node)
# also node's start-up and exit, JSON and base64 and the pipe.
#   bash bench/bisect_overhead.sh [BUILD_DIR] [KEEP_DIR]   (default build/; needs scripts/setup.sh's ONNX Runtime;
#                                                           KEEP_DIR: keep each model's bisect JSON there)
set -euo pipefail
build="${1:-build}"
keep="${2:-}"
fusediff="$build/fusediff"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$fusediff" export-onnx --out-dir "$work/models" --scales general >/dev/null
status=0
printf '%-22s %9s %9s %9s %9s  %s\n' model process_s json_s in_ort_s overhead target
for model in twin_causes resnet_block_qdq resnet_block_float conv2d_add_act_relu fc_act_gelu_erf; do
  start=$EPOCHREALTIME  # bash 5: no subprocess inside the measured span
  "$fusediff" bisect "$work/models/$model/model.onnx" --json "$work/$model.json" >/dev/null || true  # 1: a blacklist
  end=$EPOCHREALTIME
  [[ -z "$keep" ]] || { mkdir -p "$keep"; cp "$work/$model.json" "$keep/$model.json"; }
  python3 - "$work/$model.json" "$start" "$end" "$model" <<'EOF' || status=1
import json, sys
t = json.load(open(sys.argv[1]))['timing']
process = float(sys.argv[3]) - float(sys.argv[2])
overhead = (process - t['inside_onnxruntime_s']) / process
verdict = 'PASS' if overhead < 0.20 else 'FAIL'
print(f"{sys.argv[4]:<22} {process:9.3f} {t['total_s']:9.3f} {t['inside_onnxruntime_s']:9.3f} {100 * overhead:8.1f}%  {verdict}")
sys.exit(0 if verdict == 'PASS' else 1)
EOF
done
exit $status
