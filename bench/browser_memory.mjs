#!/usr/bin/env node
// Peak WebAssembly memory of each bundle in the browser: the real runtime worker (chat page's
// RuntimeClient -> Pyodide -> onnxruntime-web, WASM, 1 thread), one fresh headless Chromium per
// bundle. The worker reports its wasm heaps (client.wasmMemory(): onnxruntime-web's and
// Pyodide's); a wasm heap never shrinks, so the size after load is the load's peak and the size
// after one request is the peak of load + that request. Not a test.
//
//   node bench/browser_memory.mjs [BUNDLE_DIR ...] [--dtypes fp32,q8,...] [--json]
//
// Default: every bundle in public/models/ (a transformers.js folder once per dtype it offers, or
// those --dtypes names). The request per kind: text, 64 greedy tokens of a chat answer; speech,
// a two-sentence paragraph; voice activity and transcription, speech spoken first by the Piper
// bundle (silence when it is missing).
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, launchBrowser, startServer } from '../tests/e2e/lib/browser.mjs';
import {
  detectSpeech, ensureManifest, ensureSite, generate, loadBundle, openRuntimePage, speak, transcribe,
} from '../tests/e2e/lib/runtime.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const ONLY_DTYPES = opt('--dtypes', '');
const JSON_OUT = args.includes('--json') && args.splice(args.indexOf('--json'), 1);
const MODELS = path.join(ROOT, 'public', 'models');
const PARAGRAPH = 'It is cold outside, so close the window. The kettle is on and tea will be ready soon.';
const PIPER = path.join(MODELS, 'piper-en-us-joe');
const log = (m) => process.stderr.write(`${m}\n`);
const mib = (b) => (b === null || b === undefined ? '-' : (b / 2 ** 20).toFixed(0));

function bundleDirs() {
  const given = args.filter((a) => !a.startsWith('--')).map((a) => path.resolve(a));
  const dirs = given.length ? given : fs.readdirSync(MODELS, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(MODELS, d.name, 'manifest.json')))
    .map((d) => path.join(MODELS, d.name));
  for (const dir of dirs) {
    if (!fs.existsSync(path.join(dir, 'pipeline.json')) && !fs.existsSync(path.join(dir, 'config.json'))) {
      throw new Error(`${dir}: expected a bundle (pipeline.json) or a transformers.js folder (config.json), found neither`);
    }
  }
  return dirs;
}

/** The request that exercises a loaded bundle of this kind; speech samples feed the listeners. */
async function exercise(page, kind, audio) {
  if (kind === 'text') {
    const { result } = await generate(page, { messages: [{ role: 'user', content: 'Tell me a short story about a fox.' }],
      options: { do_sample: false, max_new_tokens: 64, ignore_eos: true } }, { timeout: 600_000 });
    return `${result.tokens.length} tokens`;
  }
  if (kind === 'speech') {
    const { samples, result } = await speak(page, { text: PARAGRAPH }, { timeout: 600_000 });
    return { note: `${(samples.length / result.sample_rate).toFixed(1)} s of audio`, samples, rate: result.sample_rate };
  }
  const { samples, rate } = audio ?? { samples: new Array(16000 * 3).fill(0), rate: 16000 };
  if (kind === 'voice-activity') {
    const { result } = await detectSpeech(page, samples, rate, {}, { timeout: 600_000 });
    return `${result.segments.length} segments`;
  }
  if (kind === 'transcription') {
    const { result } = await transcribe(page, samples, rate, {}, { timeout: 600_000 });
    return `${result.tokens.length} tokens`;
  }
  throw new Error(`no request for a ${kind} bundle`);
}

async function measure(server, name, dtype, audio) {
  const { browser, context, offsite } = await launchBrowser();
  try {
    const page = await openRuntimePage(context, server.url);
    const loaded = await loadBundle(page, `${server.url}models/${name}/`, { ep: 'wasm', dtype, threads: 1, timeout: 600_000 });
    const afterLoad = await page.evaluate(() => window.__onnxpipe.client.wasmMemory());
    const done = await exercise(page, loaded.info.kind, audio);
    const peak = await page.evaluate(() => window.__onnxpipe.client.wasmMemory());
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const files = Object.values(loaded.info.sessions).map((s) => s.file);
    return { bundle: name, dtype: loaded.info.dtype, dtypes: loaded.info.dtypes, kind: loaded.info.kind, files, after_load: afterLoad, peak,
      request: typeof done === 'string' ? done : done.note, speech: typeof done === 'string' ? null : done };
  } finally {
    await browser.close().catch(() => {});
  }
}

async function main() {
  const dirs = bundleDirs();
  const site = ensureSite({ log });
  const mounts = {};
  for (const dir of dirs) {
    ensureManifest(dir);
    mounts[`/models/${path.basename(dir)}/`] = dir;
  }
  const server = await startServer({ root: site, mounts });
  const rows = [];
  let audio = null;
  try {
    // speech first: its audio is what the listeners hear
    const order = [...dirs].sort((a, b) => (b === PIPER) - (a === PIPER));
    for (const dir of order) {
      const name = path.basename(dir);
      const isFolder = fs.existsSync(path.join(dir, 'config.json')) && !fs.existsSync(path.join(dir, 'pipeline.json'));
      let dtypes = [undefined];
      if (isFolder) {
        const first = await measure(server, name, undefined, audio);
        delete first.speech;
        rows.push(first);
        log(`# ${name} ${first.dtype}: peak ORT ${mib(first.peak.ort_bytes)} MiB`);
        const wanted = ONLY_DTYPES ? ONLY_DTYPES.split(',') : first.dtypes;
        dtypes = wanted.filter((d) => d !== first.dtype);
      }
      for (const dtype of dtypes) {
        const row = await measure(server, name, dtype, audio);
        if (row.speech && dir === PIPER) audio = { samples: row.speech.samples, rate: row.speech.rate };
        delete row.speech;
        rows.push(row);
        log(`# ${name}${row.dtype ? ` ${row.dtype}` : ''}: peak ORT ${mib(row.peak.ort_bytes)} MiB, Pyodide ${mib(row.peak.python_bytes)} MiB (${row.request})`);
      }
    }
  } finally {
    await server.stop();
  }
  if (JSON_OUT) return console.log(JSON.stringify({ threads: 1, ep: 'wasm', rows }, null, 2));
  console.log('peak wasm memory in the browser (MiB; WASM, 1 thread; a heap never shrinks, so "after request" is the peak)');
  console.log('  bundle                          file(s)                         ORT load  ORT peak  Pyodide peak  request');
  for (const r of rows) {
    const label = `${r.bundle}${r.dtype ? ` ${r.dtype}` : ''}`;
    console.log(`  ${label.padEnd(32)}${r.files.join(',').slice(0, 30).padEnd(32)}${mib(r.after_load.ort_bytes).padStart(8)}  ` +
      `${mib(r.peak.ort_bytes).padStart(8)}  ${mib(r.peak.python_bytes).padStart(12)}  ${r.request}`);
  }
}

main().catch((error) => {
  log(`browser_memory: ${error.message}`);
  process.exit(1);
});
