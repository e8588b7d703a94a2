#!/usr/bin/env node
// One greedy decode of a genai-style decoder file in onnxruntime-web's WASM build (Node, 1 thread,
// the kernels the page runs), twice: timed, then with onnxruntime's profiler on (its JSON events go
// to stdout as onnxruntime-web prints them); last, one line `RESULT {...}` with each step's time.
// bench/decode_ceiling.py reads both. Not a test.
//
//   node bench/wasm_decode_profile.mjs MODEL.onnx[:DATA] [--prompt 37] [--tokens 64] [--kv-heads 3] [--head-size 64]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ort = await import(path.join(ROOT, 'node_modules', 'onnxruntime-web', 'dist', 'ort.wasm.min.mjs'));
ort.env.wasm.numThreads = 1;

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args.splice(at, 2)[1]) : fallback;
};
const PROMPT = option('--prompt', 37);
const TOKENS = option('--tokens', 64);
const heads = option('--kv-heads', 3);       // the file's past key/value shape [1, heads, 0, headSize]:
const headSize = option('--head-size', 64);  // genai exports leave both symbolic
if (args.length !== 1 || ![PROMPT, TOKENS, heads, headSize].every((n) => Number.isInteger(n) && n >= 1)) {
  console.error('usage: wasm_decode_profile.mjs MODEL.onnx[:DATA] [--prompt N] [--tokens N] [--kv-heads N] [--head-size N] (N >= 1)');
  process.exit(2);
}
const [file, data = `${args[0].split(':')[0]}.data`] = args[0].split(':');
for (const f of [file, data]) if (!fs.existsSync(f)) { console.error(`${f}: no such file`); process.exit(2); }

async function decode(profiling) {
  const session = await ort.InferenceSession.create(new Uint8Array(fs.readFileSync(file)), {
    executionProviders: ['wasm'], graphOptimizationLevel: 'all', enableProfiling: profiling,
    externalData: [{ path: path.basename(data), data: new Uint8Array(fs.readFileSync(data)) }],
  });
  const past = session.inputNames.filter((n) => n.startsWith('past_key_values.'));
  const feeds = Object.fromEntries(past.map((n) => [n, new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, headSize])]));
  let total = 0;
  let next = Array.from({ length: PROMPT }, (_, i) => 100 + ((i * 7919) % 20000));   // a fixed, arbitrary prompt
  const steps = [];
  for (let step = 0; step <= TOKENS; step++) {
    const start = performance.now();
    total += next.length;
    feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from(next.map(BigInt)), [1, next.length]);
    feeds.attention_mask = new ort.Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]);
    const out = await session.run(feeds);
    const logits = out.logits.data;
    const vocab = out.logits.dims[2];
    const offset = logits.length - vocab;
    let best = 0;
    for (let i = 1; i < vocab; i++) if (logits[offset + i] > logits[offset + best]) best = i;
    for (const n of past) feeds[n] = out[n.replace('past_key_values.', 'present.')];
    next = [best];
    if (step > 0) steps.push((performance.now() - start) / 1000);   // step 0 is the prefill
  }
  if (profiling) session.endProfiling();
  await session.release();
  return steps;
}

// timed without the profiler (it slows each step), then the same decode profiled for the split
const plain = await decode(false);
const profiled = await decode(true);
console.log(`RESULT ${JSON.stringify({ file: path.basename(file), prompt: PROMPT, tokens: TOKENS, step_seconds: plain, profiled_step_seconds: profiled })}`);
