#!/usr/bin/env node
// Decode speed of several genai-style decoder files side by side in ONE Node process
// (onnxruntime-web's WASM build, the browser's kernels, 1 thread): every round decodes one greedy
// token with each file in turn, so a busy machine slows them alike; the ratio of median step
// times is what to read (docs/wasm-variants.md). Not a test.
//
//   node bench/wasm_decode_interleaved.mjs REFERENCE.onnx[:DATA] OTHER.onnx[:DATA] ... [--rounds 120]
//
// DATA is the external data file beside the model (default: FILE.data). The first file is the
// reference of the ratios. Prompt: "<s>The capital of France is" (SmolLM2's ids).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ort = await import(path.join(ROOT, 'node_modules', 'onnxruntime-web', 'dist', 'ort.wasm.min.mjs'));
ort.env.wasm.numThreads = 1;
const args = process.argv.slice(2);
const at = args.indexOf('--rounds');
const ROUNDS = at >= 0 ? Number(args.splice(at, 2)[1]) : 120;
if (args.length < 2 || !Number.isInteger(ROUNDS) || ROUNDS < 1) {
  console.error('usage: wasm_decode_interleaved.mjs REFERENCE.onnx[:DATA] OTHER.onnx[:DATA] ... [--rounds N>0]');
  process.exit(2);
}
const PROMPT = [1, 504, 3575, 282, 4649, 314];

async function open(spec) {
  const [file, data = `${spec.split(':')[0]}.data`] = spec.split(':');
  for (const f of [file, data]) if (!fs.existsSync(f)) throw new Error(`${f}: no such file (expected MODEL.onnx[:DATA])`);
  const session = await ort.InferenceSession.create(new Uint8Array(fs.readFileSync(file)), {
    executionProviders: ['wasm'], graphOptimizationLevel: 'all',
    // the name the model's external data entries use: the file's own name
    externalData: [{ path: path.basename(data), data: new Uint8Array(fs.readFileSync(data)) }],
  });
  const past = session.inputNames.filter((n) => n.startsWith('past_key_values.'));
  const feeds = Object.fromEntries(past.map((n) => [n, new ort.Tensor('float32', new Float32Array(0), [1, 3, 0, 64])]));
  return { name: path.basename(file), session, past, feeds, total: 0, next: PROMPT, times: [] };
}

async function step(s) {
  s.total += s.next.length;
  s.feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from(s.next.map(BigInt)), [1, s.next.length]);
  s.feeds.attention_mask = new ort.Tensor('int64', new BigInt64Array(s.total).fill(1n), [1, s.total]);
  const out = await s.session.run(s.feeds);
  const logits = out.logits.data;
  const vocab = out.logits.dims[2];
  const offset = logits.length - vocab;
  let best = 0;
  for (let i = 1; i < vocab; i++) if (logits[offset + i] > logits[offset + best]) best = i;
  for (const n of s.past) s.feeds[n] = out[n.replace('past_key_values.', 'present.')];
  s.next = [best];
}

const runs = [];
for (const spec of args) runs.push(await open(spec));
for (const s of runs) await step(s); // the prefill, not timed
for (let round = 0; round < ROUNDS; round++) {
  for (const s of runs) {
    const t0 = performance.now();
    await step(s);
    s.times.push(performance.now() - t0);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(runs[0].times);
console.log(`decode, onnxruntime-web ${ort.env.versions.web} WASM in Node, 1 thread, ${ROUNDS} interleaved greedy steps`);
for (const s of runs) {
  console.log(`  ${s.name.padEnd(28)} ${(1000 / median(s.times)).toFixed(2).padStart(7)} tokens/s (median step)   ratio ${(base / median(s.times)).toFixed(2)}`);
}
