// client.wasmMemory(): the worker's wasm heap sizes (workers/wasm-memory.ts), as
// bench/browser_memory.mjs reads them. Before a load a runtime may not have a heap yet; after
// loading the Silero VAD bundle onnxruntime-web's heap holds at least the model file and
// Pyodide's exists; a request never makes either smaller (a wasm heap only grows).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { detectSpeech, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE_DIR = path.join(ROOT, 'public', 'models', 'silero-vad');
const MODEL = path.join(BUNDLE_DIR, 'silero_vad_v5.onnx');
const missing = ['manifest.json', 'pipeline.json', 'silero_vad_v5.onnx'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));

let server, browser, context, offsite;
before(async () => {
  if (missing.length) return;
  server = await startServer({ root: siteDir() });
  ({ browser, context, offsite } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('wasmMemory reports the ORT and Pyodide heaps, growing only', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/silero-vad/ lacks ${missing.join(', ')}: run make models`);
  const page = await openRuntimePage(context, server.url);
  const memory = () => page.evaluate(() => window.__onnxpipe.client.wasmMemory());
  try {
    const first = await memory(); // null where a runtime has not started yet (the worker may start them early)
    for (const v of [first.ort_bytes, first.python_bytes]) assert.ok(v === null || v > 0, JSON.stringify(first));
    assert.ok(Array.isArray(first.ort_heaps) && first.ort_heaps.every((n) => n > 0), JSON.stringify(first));
    await loadBundle(page, `${server.url}models/silero-vad/`, { ep: 'wasm', threads: 1 });
    const loaded = await memory();
    assert.ok(loaded.ort_bytes >= fs.statSync(MODEL).size, `ORT heap ${loaded.ort_bytes} B < the model file`);
    assert.ok(loaded.python_bytes > 0, `Pyodide heap ${loaded.python_bytes}`);
    // one onnxruntime-web instance for a bundle this small; its heap is the whole ORT figure
    assert.equal(loaded.ort_heaps.length, 1, JSON.stringify(loaded));
    assert.equal(loaded.ort_heaps[0], loaded.ort_bytes, JSON.stringify(loaded));
    assert.ok(loaded.ort_bytes >= (first.ort_bytes ?? 0) && loaded.python_bytes >= (first.python_bytes ?? 0), JSON.stringify({ first, loaded }));
    const samples = Array.from({ length: 16000 }, (_, i) => 0.3 * Math.sin((2 * Math.PI * 220 * i) / 16000));
    await detectSpeech(page, samples, 16000);
    const peak = await memory();
    assert.ok(peak.ort_bytes >= loaded.ort_bytes && peak.python_bytes >= loaded.python_bytes, JSON.stringify({ loaded, peak }));
    assert.deepEqual(offsite, []);
  } finally {
    await page.close();
  }
});
