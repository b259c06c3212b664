'use strict';
// ONNX Runtime 1.30's SimplifiedLayerNormFusion removes the node its fused node reads (docs/bisect.md, "Refused
// sessions"). Each model of ort_simplified_layernorm_scale.py at level all, first with every transformer, then with
// SimplifiedLayerNormFusion alone (the others disabled by name); the optimized model saved where a session builds.
//   NODE_PATH=fused/onnxruntime/runner/node_modules node docs/repro/ort_simplified_layernorm_scale.js DIR
// Prints one line per session. Exit 0 when ONNX Runtime behaves as documented there (scale_first refused,
// scale_last and scale_first_2d fused and built), 1 otherwise (a fixed ONNX Runtime: update docs/bisect.md).
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const dir = process.argv[2];
const list = path.join(__dirname, '..', '..', 'harness', 'bisect', 'data', 'onnxruntime-1.30.0-optimizers.json');
const names = JSON.parse(fs.readFileSync(list)).optimizers.map((o) => o.name);
const expected = { scale_first: 'refused', scale_last: 'fused', scale_first_2d: 'fused' };

async function session(model, alone) {
  const saved = path.join(dir, model + (alone ? '.alone' : '.all') + '.optimized.onnx');
  const options = { graphOptimizationLevel: 'all', intraOpNumThreads: 1, optimizedModelFilePath: saved, logSeverityLevel: 3 };
  if (alone) options.extra = { 'optimization.disable_specified_optimizers': names.filter((n) => n !== alone).join(';') };
  try {
    await ort.InferenceSession.create(path.join(dir, model + '.onnx'), options);
  } catch (e) {
    return ['refused', e.message];
  }
  const fused = fs.readFileSync(saved).includes('SimplifiedLayerNormalization');
  return [fused ? 'fused' : 'built, not fused', ''];
}

(async () => {
  let ok = true;
  for (const model of Object.keys(expected)) {
    for (const alone of [null, 'SimplifiedLayerNormFusion']) {
      const [result, message] = await session(model, alone);
      console.log(`${model}.onnx, ${alone ? 'SimplifiedLayerNormFusion alone' : 'every transformer'}: ${result}` +
                  (message ? ': ' + message : ''));
      ok = ok && result === expected[model];
    }
  }
  process.exit(ok ? 0 : 1);
})();
