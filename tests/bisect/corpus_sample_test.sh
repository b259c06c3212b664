#!/usr/bin/env bash
# A fixed sample of scripts/corpus.sh (ctest bisect.corpus_sample): six models of ONNX's backend test data, one of
# each kind the whole corpus holds, and the table's counts checked.
#   bash tests/bisect/corpus_sample_test.sh BUILD_DIR OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
data=/usr/share/libonnx-testdata/data
rm -rf "$2"
bash "$root/scripts/corpus.sh" --build "$1" --out "$2" \
  "$data/pytorch-converted/test_Conv2d" \
  "$data/pytorch-operator/test_operator_concat2" \
  "$data/simple/test_expand_shape_model1" \
  "$data/simple/test_gradient_of_add" \
  "$data/simple/test_strnorm_model_monday_casesensintive_lower" \
  "$data/pytorch-operator/test_operator_add_broadcast"
# test_Conv2d: one unnamed input, NchwcTransformer moves the float output within its rounding-error bound (kept,
# exit 0; the output is its first divergent boundary); concat2: two unnamed inputs
# bound by position; expand_shape_model1: named inputs, one int64 (a shape, from the file); then a training op, a
# string input, and an opset-6 Add ONNX Runtime 1.30 has no kernel for.
/usr/bin/python3 - "$2/corpus.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
want = {'models': 6, 'completed': 3, 'blacklisted': 0, 'binding_errors': 0, 'crashes': 0, 'other_exit_2': 0,
        'expected_agree': 3, 'expected_disagree': 0, 'unsupported': {'training op': 1, 'string type': 1},
        'moved': {}, 'kept_moving': {'NchwcTransformer': 1}, 'moving_steps': 2, 'boundaries': 2}
bad = {k: (c[k], v) for k, v in want.items() if c[k] != v}
if sum(c['engine_refusals'].values()) != 1:
    bad['engine_refusals'] = c['engine_refusals']
print('corpus sample:', 'as expected' if not bad else f'differs (have, want): {bad}')
sys.exit(1 if bad else 0)
PY
