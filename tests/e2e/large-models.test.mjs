// Models the size people run, in Chromium (docs/large-models.md), on the small version of
// Qwen2.5-0.5B's real shape (tests/fixtures/sized_small.py: its widths, 2 layers, 4096 ids):
// - q4 and q4f16 open with every MatMulNBits expanded to fp32 at load (workers/heap-weights.ts
//   makes the weights), and their greedy tokens follow native onnxruntime on the ORIGINAL file
//   (expected.json) under the margin rule;
// - the fit check's figure, counted before download from config.json, against the heap
//   onnxruntime-web holds after load and a generation, for q4 (expanded), q4 with
//   expand_weights "none" and q8;
// - a bundle past the heap (Qwen2.5-3B's config, fp16) is refused before any weight is fetched,
//   with the figures and the dtypes that would fit; the worker loads the next bundle.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, launchBrowser, python } from './lib/browser.mjs';
import { assertGreedyAgrees } from './lib/agreement.mjs';
import { generate, loadBundle, openRuntimePage, RuntimeFailure, serveFixture } from './lib/runtime.mjs';
import { execFileSync } from 'node:child_process';
import { TIMEOUTS } from './lib/timeouts.mjs';

const fx = serveFixture('sized_qwen_small', 'large-models');
// The expanded weights are the kernel's own (q - zp) * scale; the GEMM's summation order differs
// from native MatMulNBits (AVX2 blocks) and from onnxruntime-web's fp32 kernels: fp32 noise.
const EXPANDED_VS_NATIVE = 1e-2;
// q4f16 rounds every activation to fp16 around its MatMuls (a few fp16 ulps of a logit).
const EXPANDED_FP16_VS_NATIVE = 0.1;
// The fit check counts the weights and reserves the engine's own memory, the KV cache and one
// prefill chunk; after load and a short generation the heap holds the weights and less than the
// engine's reserve besides (docs/large-models.md). Slack for the heap's 64 KiB pages and arena.
const FIT_SLACK = 0.03;

async function onPage(body) {
  const page = await openRuntimePage(fx.context, fx.server.url);
  try {
    return await body(page);
  } catch (err) {
    console.error(fx.logs.slice(-40).join('\n'));
    throw err;
  } finally {
    await page.close();
  }
}

for (const [dtype, tolerance] of [['q4', EXPANDED_VS_NATIVE], ['q4f16', EXPANDED_FP16_VS_NATIVE]]) {
  test(`sized Qwen2.5-0.5B shape, ${dtype}: every MatMulNBits expanded at load, greedy tokens follow native onnxruntime on the original file`,
    { timeout: TIMEOUTS.file }, async (t) => {
      if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
      const want = fx.expected.variants[dtype];
      await onPage(async (page) => {
        const { info } = await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'wasm', dtype });
        const heap = info.sessions.decoder.heap;
        assert.equal(info.sessions.decoder.file, want.file);
        assert.ok(heap.expanded > 0 && heap.kept === 0 && heap.temp_bytes === 0, JSON.stringify(heap));
        assert.equal(info.heap.expanded_all, true);
        const { result } = await generate(page, { input_ids: fx.expected.prompt, options: { do_sample: false, max_new_tokens: fx.expected.steps, ignore_eos: true } });
        assertGreedyAgrees(result.tokens, want.greedy_tokens, want.margins, tolerance, `${dtype} in Chromium`);
      });
    });
}

test('the fit check counted before download against the heap measured after load', { timeout: TIMEOUTS.file }, async (t) => {
  if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
  const rows = [];
  for (const [dtype, expandWeights] of [['q4', 'auto'], ['q4', 'none'], ['q8', 'auto']]) {
    // a fresh page per load: a load after the first starts a fresh worker, so each heap is its own
    await onPage(async (page) => {
      const { info } = await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'wasm', dtype, expandWeights });
      await generate(page, { input_ids: fx.expected.prompt, options: { do_sample: false, max_new_tokens: 4, ignore_eos: true } });
      const measured = (await page.evaluate(() => window.__onnxpipe.client.wasmMemory())).ort_bytes;
      const fit = info.heap;
      assert.equal(fit.weights_exact, false, 'the fixture holds its weights inline: counted from config.json');
      // the weights counted before download, and what a short generation left in the heap: the
      // weights plus the engine's own, which the fit reserves (with the KV cache at the full
      // context and a 128-token chunk, which it did not use here)
      const weights = fit.need_bytes - fit.kv_bytes - fit.work_bytes - fit.engine_bytes;
      rows.push({ dtype, expandWeights, weights, measured, engine: fit.engine_bytes, over: measured - weights });
      assert.ok(measured >= weights * (1 - FIT_SLACK) && measured <= (weights + fit.engine_bytes) * (1 + FIT_SLACK),
        `${dtype} (${expandWeights}): ${weights} bytes of weights counted before download (+ ${fit.engine_bytes} for the engine), the heap holds ${measured}`);
      assert.equal(info.heap.expanded_all, expandWeights !== 'none' || dtype === 'q8');
    });
  }
  console.log(JSON.stringify(rows));
});

test('a bundle past the heap is refused before any weight is fetched, with its figures and what fits', { timeout: TIMEOUTS.file }, async (t) => {
  if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
  const big = path.join(ROOT, 'build', 'e2e', `large-models-${process.pid}`, 'qwen2.5-3b');
  fs.rmSync(big, { recursive: true, force: true });
  // Qwen2.5-3B's real config.json; its weight files listed in manifest.json with the sizes
  // transformers.js's recipes give them, but never written: fetching one would fail
  execFileSync(python(), ['-m', 'tests.fixtures.config_only', 'qwen2.5-3b', big], {
    cwd: ROOT, env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) } });
  const fetched = [];
  fx.context.on('request', (r) => { if (/qwen2\.5-3b\/onnx\//.test(r.url())) fetched.push(r.url()); });
  await onPage(async (page) => {
    const base = `${fx.server.url}fixtures/qwen2.5-3b/`;
    await assert.rejects(loadBundle(page, base, { ep: 'wasm', dtype: 'fp16' }), (err) => {
      assert.ok(err instanceof RuntimeFailure && err.kind === 'memory', String(err));
      assert.match(err.detail, /qwen2\.5-3b dtype fp16 needs \d+\.\d\d GiB at the least, more than onnxruntime-web's 2 WASM heaps of 4\.00 GiB hold/);
      assert.match(err.detail, /so it was not downloaded/);
      assert.match(err.detail, /dtypes that fit: .*q4f16/);
      return true;
    });
    assert.deepEqual(fetched, [], 'no weight file was requested');
    // the worker is still usable: the small model loads and answers
    const { info } = await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'wasm', dtype: 'q4' });
    assert.equal(info.dtype, 'q4');
  });
  fs.rmSync(big, { recursive: true, force: true });
});

// SwiftShader has no shader-f16 ("Program Gather requires f16 but the device does not support it"),
// so the fp32-activation q4 file, whose MatMulNBits run on the GPU as they are
test('WebGPU (SwiftShader) runs the real-shape q4 file as it is: MatMulNBits on the GPU, greedy tokens follow native onnxruntime', { timeout: TIMEOUTS.file }, async (t) => {
  if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
  const { browser, context, offsite } = await launchBrowser({ args: ['--enable-unsafe-webgpu'] });
  try {
    const page = await openRuntimePage(context, fx.server.url);
    const adapter = await page.evaluate(async () => Boolean(await navigator.gpu?.requestAdapter().catch(() => null)));
    if (!adapter) return t.skip('no WebGPU adapter in this Chromium (even with --enable-unsafe-webgpu)');
    const want = fx.expected.variants.q4;
    const { info } = await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'webgpu', dtype: 'q4' });
    assert.match(info.sessions.decoder.provider, /webgpu/i);
    assert.equal(info.sessions.decoder.heap, undefined, 'no heap plan off wasm: the weights live on the GPU');
    assert.equal(info.heap, undefined);
    // SwiftShader runs each step's shaders on the CPU (seconds a token): 6 of the 16 steps
    const steps = 6;
    const { result } = await generate(page, { input_ids: fx.expected.prompt, options: { do_sample: false, max_new_tokens: steps, ignore_eos: true } });
    assert.equal(result.tokens.length, steps);
    const agreed = assertGreedyAgrees(result.tokens, want.greedy_tokens.slice(0, steps), want.margins, EXPANDED_VS_NATIVE, 'q4 on WebGPU');
    console.log(`# webgpu q4: ${agreed.agreed} of ${want.greedy_tokens.length} tokens equal native's`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } finally {
    await browser.close();
  }
});

test('a decoder spread over two heaps (heaps: 2): two onnxruntime-web instances, one part each, the same tokens', { timeout: TIMEOUTS.file }, async (t) => {
  if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
  const want = fx.expected.variants.q4;
  await onPage(async (page) => {
    const { info } = await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'wasm', dtype: 'q4', heaps: 2 });
    assert.equal(info.heap.heaps, 2);
    const heap = info.sessions.decoder.heap;
    assert.equal(heap.heaps, 2, JSON.stringify(heap));
    assert.ok(heap.expanded > 0 && heap.kept === 0, JSON.stringify(heap));
    const memory = await page.evaluate(() => window.__onnxpipe.client.wasmMemory());
    assert.equal(memory.ort_heaps.length, 2, `onnxruntime-web heaps: ${JSON.stringify(memory.ort_heaps)}`);
    const { result } = await generate(page, { input_ids: fx.expected.prompt, options: { do_sample: false, max_new_tokens: fx.expected.steps, ignore_eos: true } });
    assertGreedyAgrees(result.tokens, want.greedy_tokens, want.margins, EXPANDED_VS_NATIVE, 'q4 over two heaps');
    // a conversation goes on in both parts' caches: a second turn continues from the kept state
    const again = await generate(page, { input_ids: fx.expected.prompt, options: { do_sample: false, max_new_tokens: 4, ignore_eos: true } });
    assert.equal(again.result.tokens.length, 4);
  });
});

test('a long prompt is fed in chunks: a cancel during its prefill returns within a chunk, with no token', { timeout: TIMEOUTS.file }, async (t) => {
  if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
  await onPage(async (page) => {
    await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'wasm', dtype: 'q4' });
    // 6 chunks of 128 tokens (loops/autoregressive.py PREFILL_CHUNK) and a few more
    const prompt = Array.from({ length: 800 }, (_, i) => 300 + (i % 3000));
    const whole = await generate(page, { input_ids: prompt, options: { do_sample: false, max_new_tokens: 1 } });
    const cancelled = await page.evaluate(async (ids) => {
      const client = window.__onnxpipe.client;
      const t0 = performance.now();
      const run = client.generate({ input_ids: ids, options: { do_sample: false, max_new_tokens: 8 } });
      // the page asks the worker something while the prefill runs: answered between chunks
      await new Promise((r) => setTimeout(r, 50));
      const asked = performance.now();
      await client.wasmMemory();
      const answeredMs = performance.now() - asked;
      client.cancel();
      const result = await run;
      return { result, ms: performance.now() - t0, answeredMs };
    }, prompt);
    assert.equal(cancelled.result.finish_reason, 'cancelled');
    assert.deepEqual(cancelled.result.tokens, [], 'no token made: the prefill itself was cut');
    const prefill = whole.result.prefill_ms;
    assert.ok(cancelled.ms < prefill * 0.8, `cancelled after ${cancelled.ms.toFixed(0)} ms; the whole prefill takes ${prefill.toFixed(0)} ms`);
    assert.ok(cancelled.answeredMs < prefill * 0.6, `the worker answered in ${cancelled.answeredMs.toFixed(0)} ms of a ${prefill.toFixed(0)} ms prefill`);
    console.log(`# prefill of ${prompt.length} tokens: ${prefill.toFixed(0)} ms whole; a question answered in ${cancelled.answeredMs.toFixed(0)} ms, cancelled in ${cancelled.ms.toFixed(0)} ms`);
  });
});

// The page's watch takes a call that hears nothing from the worker for busySilenceMs as a hang
// (web/src/runtime-watch.ts). A long prefill streams no token, so the worker says 'alive' between
// its chunks; here the silence allowed is 2 s and the prefill takes longer. The load runs under
// the default watch: the runtime's start and a session's opening are silent for longer than 2 s
// on a loaded machine.
test('a prefill longer than the hang watch allows is not taken for a hang: the worker says it is alive between chunks', { timeout: TIMEOUTS.file }, async (t) => {
  if (!fx.have) return t.skip('tests/fixtures/.cache/sized_qwen_small missing: make fixtures');
  const silenceMs = 2000;
  const page = await openRuntimePage(fx.context, `${fx.server.url}?onnxpipe-debug`);
  try {
    await loadBundle(page, `${fx.server.url}fixtures/${fx.name}/`, { ep: 'wasm', dtype: 'q4' });
    await page.evaluate((ms) => window.__onnxpipe.client.debug.watchSilence(ms), silenceMs);
    const prompt = Array.from({ length: 2400 }, (_, i) => 300 + (i % 3000));
    const { result } = await generate(page, { input_ids: prompt, options: { do_sample: false, max_new_tokens: 1, ignore_eos: true } });
    assert.equal(result.tokens.length, 1);
    assert.ok(result.prefill_ms > silenceMs, `the prefill took ${result.prefill_ms.toFixed(0)} ms, no longer than the ${silenceMs} ms watched: this checks nothing`);
    console.log(`# prefill of ${prompt.length} tokens in ${result.prefill_ms.toFixed(0)} ms under a ${silenceMs} ms hang watch`);
  } finally {
    await page.close();
  }
});
