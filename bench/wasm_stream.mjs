#!/usr/bin/env node
// How fast one WASM thread can read memory: a hand-assembled module streams a buffer with
// 128-bit SIMD loads into four f32x4 accumulators (no stores, nothing else), best of --runs
// passes. In V8 (Node), the engine Chromium runs onnxruntime-web's WASM in. This rate bounds
// any kernel that must read every weight once per token (bench/decode_ceiling.py). Not a test.
//
//   node bench/wasm_stream.mjs [--bytes 540000000] [--runs 10]

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const BYTES = Math.ceil(option('--bytes', 540e6) / 64) * 64;
const RUNS = option('--runs', 10);
if (!(BYTES > 0 && BYTES < 1024 ** 3) || !(RUNS >= 1)) {
  console.error('usage: wasm_stream.mjs [--bytes N (0 < N < 1 GiB)] [--runs N >= 1]');
  process.exit(2);
}

const leb = (n) => { const out = []; do { let b = n & 0x7f; n >>>= 7; if (n) b |= 0x80; out.push(b); } while (n); return out; };
const section = (id, bytes) => [id, ...leb(bytes.length), ...bytes];
const name = (s) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];
const SIMD = 0xfd, V128_LOAD = 0x00, F32X4_ADD = leb(228), F32X4_LANE = 0x1f;
const get = (i) => [0x20, i], set = (i) => [0x21, i];
// acc[i] += v128.load(ptr + 16 i)
const accumulate = (i) => [...get(2 + i), ...get(0), SIMD, V128_LOAD, 4, 16 * i, SIMD, ...F32X4_ADD, ...set(2 + i)];
// sum(ptr: i32, end: i32) -> f32 over [ptr, end), 64 bytes a round
const body = [
  1, 4, 0x7b,                                              // locals 2..5: v128 accumulators
  0x02, 0x40, 0x03, 0x40,                                  // block, loop
  ...get(0), ...get(1), 0x4f, 0x0d, 1,                     // ptr >= end: leave
  ...accumulate(0), ...accumulate(1), ...accumulate(2), ...accumulate(3),
  ...get(0), 0x41, ...[0xc0, 0x00], 0x6a, ...set(0),       // ptr += 64
  0x0c, 0, 0x0b, 0x0b,                                     // again; end loop, end block
  ...get(2), ...get(3), SIMD, ...F32X4_ADD, ...get(4), SIMD, ...F32X4_ADD, ...get(5), SIMD, ...F32X4_ADD, ...set(2),
  ...get(2), SIMD, F32X4_LANE, 0, ...get(2), SIMD, F32X4_LANE, 1, 0x92,
  ...get(2), SIMD, F32X4_LANE, 2, 0x92, ...get(2), SIMD, F32X4_LANE, 3, 0x92,
  0x0b,
];
const module = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
  ...section(1, [1, 0x60, 2, 0x7f, 0x7f, 1, 0x7d]),        // type: (i32, i32) -> f32
  ...section(3, [1, 0]),                                   // one function of that type
  ...section(5, [1, 1, 1, ...leb(16384)]),                 // memory: 1 page, at most 1 GiB
  ...section(7, [2, ...name('sum'), 0, 0, ...name('memory'), 2, 0]),
  ...section(10, [1, ...leb(body.length), ...body]),
]);

const { instance } = await WebAssembly.instantiate(module);
const { sum, memory } = instance.exports;
memory.grow(Math.ceil(BYTES / 65536));
const floats = new Float32Array(memory.buffer, 0, BYTES / 4);
for (let i = 0; i < floats.length; i += 1024) floats[i] = 1;   // touch every page before timing
const expected = Math.ceil(floats.length / 1024);
let best = Infinity;
for (let run = 0; run < RUNS; run++) {
  const start = performance.now();
  const total = sum(0, BYTES);
  best = Math.min(best, performance.now() - start);
  if (total !== expected) throw new Error(`the stream summed ${total}, expected ${expected}`);
}
console.log(JSON.stringify({ bytes: BYTES, seconds: best / 1000, bytes_per_second: BYTES / (best / 1000), runs: RUNS }));
