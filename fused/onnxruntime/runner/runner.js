'use strict';
// fusediff's ONNX Runtime runner. fusediff starts it as a child process (one per bisect) and speaks one JSON
// object per line over stdin/stdout; nothing else is ever written to stdout. Requests:
//   {"op":"version"}
//   {"op":"create","model":PATH,"level":"disabled|basic|extended|layout|all","config":{KEY:VALUE},
//    "optimized":PATH|null}                               -> {"session":ID,"inputs":[...],"outputs":[...]}
//   {"op":"run","session":ID,"feeds":[TENSOR]}           -> {"outputs":[TENSOR]}
//   {"op":"evaluate", create's fields, "sets":[[TENSOR]], "throwaway":N, "warmup":W, "repeats":R}
//                                                        -> {"inputs","outputs","results","ms" (when R > 0)}
//   {"op":"time","session":ID,"feeds":[TENSOR],"warmup":W,"repeats":R} -> {"ms":[...]}
//   {"op":"release","session":ID}
// TENSOR = {"name","type" (ORT's name: float32, int8, uint8, int32, ...),"dims":[...],"data":BASE64 little-endian}.
// Each answer is {"ok":true,...,"ort_ms":MS inside ONNX Runtime} or {"ok":false,"error":TEXT,"phase":"create"|"run"}
// (phase: where ONNX Runtime refused: creating the session or running it). `config` entries are passed as session config
// entries exactly as given (sessionOptions.extra with a flat key: the binding adds KEY as it is), so the caller
// owns the exact value of optimization.disable_specified_optimizers. One intra-op thread: repeatable timing and
// results on a shared machine.
const readline = require('node:readline');

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  process.stdout.write(JSON.stringify({ ok: false, error: 'cannot load onnxruntime-node: ' + e.message }) + '\n');
  process.exit(2);
}

// onnxruntime-common's Tensor takes float16 as the bits in a Uint16Array and bool as a Uint8Array; it has no bfloat16.
const arrays = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  float16: Uint16Array, bool: Uint8Array,
};

// An error of ONNX Runtime's, marked with where it refused.
function refused(phase, e) {
  const error = e instanceof Error ? e : new Error(String(e));
  error.phase = phase;
  return error;
}
async function inOrtPhase(phase, f) {
  try {
    return await inOrt(f);
  } catch (e) {
    throw refused(phase, e);
  }
}

function toOrt(t) {
  const Ctor = arrays[t.type];
  if (!Ctor) throw refused('run', new Error('the Node runner cannot pass ' + t.type + ' tensors (' + t.name + '): onnxruntime-node has no such tensor type; use the in-process runtime'));
  const bytes = Buffer.from(t.data, 'base64');
  if (bytes.length % Ctor.BYTES_PER_ELEMENT !== 0) throw new Error('tensor ' + t.name + ': ragged data');
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new ort.Tensor(t.type, new Ctor(copy.buffer, 0, bytes.length / Ctor.BYTES_PER_ELEMENT), t.dims);
}

function fromOrt(name, t) {
  const d = t.data;
  return { name, type: t.type, dims: Array.from(t.dims),
           data: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64') };
}

function feedsOf(list) {
  const feeds = {};
  for (const t of list) feeds[t.name] = toOrt(t);
  return feeds;
}

const sessions = new Map();
let nextId = 1;

// Milliseconds spent inside ONNX Runtime's own calls (create, run, release) while serving one request: what the
// caller subtracts from its wall time to measure its own overhead.
let ortMs = 0;
async function inOrt(f) {
  const start = process.hrtime.bigint();
  try {
    return await f();
  } finally {
    ortMs += Number(process.hrtime.bigint() - start) / 1e6;
  }
}

async function handle(req) {
  switch (req.op) {
    case 'version':
      return { ort: require('onnxruntime-node/package.json').version, node: process.versions.node };
    case 'create': {
      const options = { graphOptimizationLevel: req.level, intraOpNumThreads: 1, interOpNumThreads: 1,
                        executionMode: 'sequential', executionProviders: ['cpu'], logSeverityLevel: 3 };
      if (req.optimized) options.optimizedModelFilePath = req.optimized;
      if (req.config && Object.keys(req.config).length > 0) options.extra = req.config;
      const session = await inOrtPhase('create', () => ort.InferenceSession.create(req.model, options));
      const id = nextId++;
      sessions.set(id, session);
      return { session: id, inputs: session.inputNames, outputs: session.outputNames };
    }
    case 'run': {
      const session = sessions.get(req.session);
      if (!session) throw new Error('no session ' + req.session);
      const feeds = feedsOf(req.feeds);
      const result = await inOrtPhase('run', () => session.run(feeds));
      return { outputs: session.outputNames.map((n) => fromOrt(n, result[n])) };
    }
    case 'evaluate': {  // create, run every set, time the first (if asked), release: one round trip per session
      const created = await handle(Object.assign({}, req, { op: 'create' }));
      const session = sessions.get(created.session);
      const answer = { inputs: created.inputs, outputs: created.outputs, results: [] };
      try {
        for (const set of req.sets) {
          const feeds = feedsOf(set);
          const result = await inOrtPhase('run', () => session.run(feeds));
          answer.results.push(session.outputNames.map((n) => fromOrt(n, result[n])));
        }
        if (req.repeats > 0) {
          const feeds = feedsOf(req.sets[0]);
          for (let i = 0; i < req.throwaway; ++i) await inOrt(() => session.run(feeds));
          answer.ms = (await handle({ op: 'time', session: created.session, warmup: req.warmup, repeats: req.repeats,
                                      feeds: req.sets[0] })).ms;
        }
      } finally {
        await handle({ op: 'release', session: created.session });
      }
      return answer;
    }
    case 'time': {
      const session = sessions.get(req.session);
      if (!session) throw new Error('no session ' + req.session);
      const feeds = feedsOf(req.feeds);
      for (let i = 0; i < req.warmup; ++i) await inOrt(() => session.run(feeds));
      const ms = [];
      for (let i = 0; i < req.repeats; ++i) {
        const start = process.hrtime.bigint();
        try {
          await session.run(feeds);
        } catch (e) {
          throw refused('run', e);
        }
        const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
        ortMs += elapsed;
        ms.push(elapsed);
      }
      return { ms };
    }
    case 'release': {
      const session = sessions.get(req.session);
      if (session) await inOrt(() => session.release());
      sessions.delete(req.session);
      return {};
    }
    default:
      throw new Error('unknown op ' + req.op);
  }
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(async () => {
    let answer;
    ortMs = 0;
    try {
      answer = Object.assign({ ok: true }, await handle(JSON.parse(line)));
      answer.ort_ms = ortMs;
    } catch (e) {
      answer = { ok: false, error: String(e && e.message ? e.message : e), phase: (e && e.phase) || 'create' };
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
  });
});
lines.on('close', () => { queue.then(() => process.exit(0)); });
