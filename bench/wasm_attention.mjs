#!/usr/bin/env node
// One decoder run over a long past, two graphs of the same weights side by side in ONE Node
// process (onnxruntime-web's WASM build, the browser's kernels, 1 thread): SmolLM2's
// model.wasm.onnx (onnxruntime-web's GroupQueryAttention kernel) and model.web.onnx (the same
// graph with attention in standard ops: py/onnxpipe/export/unfused_attention.py). For each P
// cached positions, S new tokens (15: a spoken question after the chat template; 1: a decode
// step); best of --repeat runs each, interleaved so a busy machine slows both alike. Not a test.
//
//   node bench/wasm_attention.mjs [BUNDLE] [--past 24,196,426,800] [--new 15,1] [--repeat 3]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ort = await import(path.join(ROOT, 'node_modules', 'onnxruntime-web', 'dist', 'ort.wasm.min.mjs'));
ort.env.wasm.numThreads = 1;

function option(args, name, fallback) {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const [, value] = args.splice(at, 2);
  const list = String(value).split(',').map(Number);
  if (!list.length || list.some((n) => !Number.isInteger(n) || n < (name === '--past' ? 0 : 1))) {
    console.error(`${name}: expected whole numbers separated by commas (${name === '--past' ? '>= 0' : '>= 1'}), got ${value}`);
    process.exit(2);
  }
  return list;
}
const args = process.argv.slice(2);
const PAST = option(args, '--past', [24, 196, 426, 800]);
const NEW = option(args, '--new', [15, 1]);
const [REPEAT] = option(args, '--repeat', [3]);
const bundle = args[0] ?? path.join(ROOT, 'public', 'models', 'smollm2-135m-instruct');
const pipeline = JSON.parse(fs.readFileSync(path.join(bundle, 'pipeline.json'), 'utf8'));
const { num_heads: HEADS, head_size: SIZE } = pipeline.pipeline.state.kv_cache;
const FILES = { groupqueryattention: 'model.wasm.onnx', 'standard ops': pipeline.pipeline.sessions.decoder.file.wasm };
const data = new Uint8Array(fs.readFileSync(path.join(bundle, 'model.wasm.onnx.data')));

const sessions = {};
for (const [label, file] of Object.entries(FILES)) {
  sessions[label] = await ort.InferenceSession.create(new Uint8Array(fs.readFileSync(path.join(bundle, file))),
    { externalData: [{ path: 'model.wasm.onnx.data', data }] });
}
const pastNames = sessions.groupqueryattention.inputNames.filter((n) => n.startsWith('past_key_values.'));

function feeds(past, fresh) {
  const f = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from({ length: fresh }, (_, i) => BigInt(100 + i)), [1, fresh]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(past + fresh).fill(1n), [1, past + fresh]),
  };
  for (const name of pastNames) {
    f[name] = new ort.Tensor('float32', Float32Array.from({ length: HEADS * past * SIZE }, () => Math.random() - 0.5), [1, HEADS, past, SIZE]);
  }
  return f;
}

const rows = [];
for (const past of PAST) {
  for (const fresh of NEW) {
    const f = feeds(past, fresh);
    const best = Object.fromEntries(Object.keys(sessions).map((k) => [k, Infinity]));
    for (let r = 0; r < REPEAT; r++) {
      for (const [label, session] of Object.entries(sessions)) {
        const t = performance.now();
        await session.run(f);
        best[label] = Math.min(best[label], performance.now() - t);
      }
    }
    rows.push({ past, new: fresh, ...Object.fromEntries(Object.entries(best).map(([k, v]) => [k, Math.round(v)])) });
  }
}
console.log(`${FILES['standard ops']} vs model.wasm.onnx, onnxruntime-web ${ort.env.versions?.web ?? ''} WASM, 1 thread, best of ${REPEAT} (ms per run):`);
console.log('| cached | new | GroupQueryAttention | standard ops | ratio |');
console.log('|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.past} | ${r.new} | ${r.groupqueryattention} | ${r['standard ops']} | ${(r.groupqueryattention / r['standard ops']).toFixed(2)}x |`);
}
