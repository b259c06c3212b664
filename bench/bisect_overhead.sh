#!/usr/bin/env bash
# fusediff's own overhead in `fusediff bisect` (issue 14's target: under 20 % of the bisect's wall time): the wall
# time outside ONNX Runtime's own calls (fusediff, the Node runner, the pipe and JSON between them), from each
# bisect's JSON (timing.fusediff_overhead), on the exported demo models and two patterns.
#   bash bench/bisect_overhead.sh [BUILD_DIR]        (default build/; needs scripts/setup.sh's ONNX Runtime)
set -euo pipefail
build="${1:-build}"
fusediff="$build/fusediff"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$fusediff" export-onnx --out-dir "$work/models" --scales general >/dev/null
status=0
printf '%-28s %10s %12s %10s  %s\n' model wall_s inside_ort_s overhead target
for model in twin_causes resnet_block_qdq resnet_block_float conv2d_add_act_relu fc_act_gelu_erf; do
  start=$(date +%s.%N)
  "$fusediff" bisect "$work/models/$model/model.onnx" --json "$work/$model.json" >/dev/null || true  # 1: a blacklist
  end=$(date +%s.%N)
  read -r total inside overhead < <(python3 -c "
import json, sys
t = json.load(open(sys.argv[1]))['timing']
print(t['total_s'], t['inside_onnxruntime_s'], t['fusediff_overhead'])" "$work/$model.json")
  verdict=$(python3 -c "import sys; print('PASS' if float(sys.argv[1]) < 0.20 else 'FAIL')" "$overhead")
  [[ "$verdict" == PASS ]] || status=1
  printf '%-28s %10.3f %12.3f %9.1f%%  %s (process %.2f s)\n' "$model" "$total" "$inside" \
    "$(python3 -c "print(100 * float('$overhead'))")" "$verdict" "$(python3 -c "print($end - $start)")"
done
exit $status
