#!/usr/bin/env node
// The transcript stage alone in headless Chromium (WASM), one browser per thread count, three
// drivers on the same 16 kHz clips: onnxpipe's worker with the bundle whose
// preprocessing.audio.context.encode is "speech", the same with "window" (the whole 30 s), and
// transformers.js's automatic-speech-recognition pipeline on a folder of the same weights
// (bench/whisper_tjs.py). Per clip: one warm-up run, then --repeat runs, the median time and the
// transcript. Called by bench/asr_context.py --browser; not a test.
//
//   node bench/browser_asr.mjs --speech DIR --window DIR [--tjs DIR] [--threads 1,2] [--repeat 2] CLIP.wav...
//
// Times: onnxpipe's wall_ms is the page's client.transcribe round trip (worker messages
// included) and compute_s what the worker reports; transformers.js's wall_ms is its pipeline
// call (feature extraction, encoder, greedy decode, detokenizing) in the page.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launchBrowser, startServer } from '../tests/e2e/lib/browser.mjs';
import { ensureManifest, ensureSite, loadBundle, openRuntimePage, transcribe } from '../tests/e2e/lib/runtime.mjs';
import { readWav } from '../tests/e2e/lib/wav.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const SPEECH = path.resolve(opt('--speech', ''));
const WINDOW = path.resolve(opt('--window', ''));
const TJS_MODEL = opt('--tjs', path.join(ROOT, 'build', 'bench-node', 'models', 'whisper-base'));
const THREADS = opt('--threads', '1').split(',').map(Number);
const REPEAT = Number(opt('--repeat', 2));
const CLIPS = args;
const TJS_DIR = path.join(ROOT, 'build', 'bench-node');
const TJS = path.join(TJS_DIR, 'node_modules', '@huggingface', 'transformers', 'dist');
const TJS_ORT = path.join(TJS_DIR, 'node_modules', 'onnxruntime-web', 'dist');
const log = (m) => process.stderr.write(`${m}\n`);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

async function timedRuns(run) {
  await run();   // warm-up: the first run of a shape allocates
  const runs = [];
  for (let r = 0; r < REPEAT; r++) runs.push(await run());
  return runs;
}

async function onnxpipe(context, url, name, clip, threads) {
  const page = await openRuntimePage(context, url);
  try {
    await loadBundle(page, `${url}models/${name}/`, { ep: 'wasm', threads });
    const out = [];
    for (const { samples, sampleRate } of clip) {
      const runs = await timedRuns(async () => {
        const { result, wallMs } = await transcribe(page, samples, sampleRate, {}, { timeout: 600_000 });
        return { wall_ms: wallMs, compute_s: result.compute_seconds, text: result.text };
      });
      out.push({ wall_ms: median(runs.map((r) => r.wall_ms)), compute_s: median(runs.map((r) => r.compute_s)), text: runs.at(-1).text });
    }
    return out;
  } finally {
    await page.close();
  }
}

async function transformersJs(context, url, clip, threads) {
  const page = await context.newPage();
  try {
    const q = new URLSearchParams({ model: path.basename(TJS_MODEL), threads: String(threads) });
    await page.goto(`${url}bench/browser_asr_transformers.html?${q}`);
    await page.waitForFunction(() => window.__ready || window.__error, null, { timeout: 600_000, polling: 250 });
    const { ready, error } = await page.evaluate(() => ({ ready: window.__ready, error: window.__error }));
    if (error) throw new Error(error);
    const out = [];
    for (const { samples, sampleRate } of clip) {
      if (sampleRate !== 16000) throw new Error(`transformers.js takes 16 kHz samples; a clip is ${sampleRate} Hz`);
      const data = Array.from(samples);
      const runs = await timedRuns(() => page.evaluate((s) => window.__transcribe(s), data));
      out.push({ wall_ms: median(runs.map((r) => r.ms)), text: runs.at(-1).text.trim() });
    }
    return { ready, out };
  } finally {
    await page.close();
  }
}

async function main() {
  if (!CLIPS.length || !fs.existsSync(path.join(SPEECH, 'pipeline.json')) || !fs.existsSync(path.join(WINDOW, 'pipeline.json')))
    throw new Error('give --speech DIR --window DIR (bundles) and at least one CLIP.wav');
  const haveTjs = fs.existsSync(path.join(TJS, 'transformers.min.js')) && fs.existsSync(path.join(TJS_MODEL, 'onnx', 'decoder_model_merged.onnx'));
  if (!haveTjs) log('# transformers.js or its Whisper folder missing: see bench/README.md (transformers.js); onnxpipe only');
  const clip = CLIPS.map((f) => readWav(f));
  const site = ensureSite({ log });
  for (const dir of [SPEECH, WINDOW]) ensureManifest(dir);
  const mounts = { '/models/speech/': SPEECH, '/models/window/': WINDOW, '/bench/': path.join(ROOT, 'bench') };
  if (haveTjs) Object.assign(mounts, { '/tjs/': TJS, '/tjs-ort/': TJS_ORT, [`/tjs-model/${path.basename(TJS_MODEL)}/`]: TJS_MODEL });
  const server = await startServer({ root: site, mounts, csp: false });
  const report = { clips: CLIPS.map((f, i) => ({ file: f, seconds: clip[i].samples.length / clip[i].sampleRate })), runs: [] };
  if (haveTjs) report.transformers_js_version = JSON.parse(fs.readFileSync(path.join(TJS, '..', 'package.json'), 'utf8')).version;
  try {
    for (const threads of THREADS) {
      const t = Math.min(threads, os.availableParallelism());
      // a fresh browser per thread count; inside it the drivers run one after another
      const { browser, context } = await launchBrowser();
      try {
        const row = { threads: t, browser: browser.version() };
        row.speech = await onnxpipe(context, server.url, 'speech', clip, t);
        log(`# ${t} thread(s): onnxpipe speech ${row.speech.map((r) => r.wall_ms.toFixed(0)).join(', ')} ms`);
        row.window = await onnxpipe(context, server.url, 'window', clip, t);
        log(`# ${t} thread(s): onnxpipe window ${row.window.map((r) => r.wall_ms.toFixed(0)).join(', ')} ms`);
        if (haveTjs) {
          try {
            const { ready, out } = await transformersJs(context, server.url, clip, t);
            row.transformers_js = out;
            row.transformers_js_load_ms = ready.load_ms;
            log(`# ${t} thread(s): transformers.js ${out.map((r) => r.wall_ms.toFixed(0)).join(', ')} ms`);
          } catch (error) {
            row.transformers_js_error = String(error.message).split('\n')[0];
            log(`# transformers.js: ${row.transformers_js_error}`);
          }
        }
        report.runs.push(row);
      } finally {
        await browser.close();
      }
    }
  } finally {
    await server.stop();
  }
  console.log(JSON.stringify(report, null, 1));
}

main().catch((error) => {
  log(`browser_asr: ${error.stack ?? error.message}`);
  process.exit(1);
});
