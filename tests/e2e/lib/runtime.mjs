// Drive the REAL runtime worker from Node: the built chat page exposes its RuntimeClient
// (web/src/client.ts) as window.__onnxpipe.client; these helpers call it through Playwright.
//
//   const page = await openRuntimePage(context, server.url);
//   const { info } = await loadBundle(page, server.url + 'models/x/', { ep: 'wasm' });
//   const { result, events } = await generate(page, { input_ids: [1, 2], options: { max_new_tokens: 8 } });
//
// Also: bundle folders on disk made servable (manifest.json written when missing or stale),
// and the site to serve (dist/, rebuilt when stale). The native reference: ./agreement.mjs.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './browser.mjs';
import { TIMEOUTS } from './timeouts.mjs';

export class RuntimeFailure extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.kind = kind;
    this.detail = message;
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${(ms / 1000).toFixed(0)} s`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** Open the chat page and wait for its RuntimeClient. */
export async function openRuntimePage(context, baseUrl, { timeout = TIMEOUTS.page } = {}) {
  const page = await context.newPage();
  await page.goto(baseUrl, { timeout });
  await page.waitForFunction(() => Boolean(window.__onnxpipe?.client), null, { timeout, polling: 50 });
  return page;
}

/**
 * client.load(bundleUrl, {ep, variant, dtype, threads, expandWeights, contextLength}) in the page. Resolves to {info, progress, wallMs};
 * progress is the list of {phase, file} events seen. Throws RuntimeFailure on a worker error.
 */
export async function loadBundle(page, bundleUrl, { ep, variant, dtype, threads, expandWeights, contextLength, heaps, timeout = TIMEOUTS.load } = {}) {
  const reply = await withTimeout(
    page.evaluate(async ({ url, ep, variant, dtype, threads, expandWeights, contextLength, heaps }) => {
      const client = window.__onnxpipe.client;
      const progress = [];
      const t0 = performance.now();
      try {
        const info = await client.load(url, { ep, variant, dtype, threads, expandWeights, contextLength, heaps, onProgress: (e) => progress.push({ phase: e.phase, file: e.file }) });
        return { info, progress, wallMs: performance.now() - t0 };
      } catch (e) {
        return { error: { kind: e?.kind ?? 'internal', message: String(e?.message ?? e) } };
      }
    }, { url: bundleUrl, ep, variant, dtype, threads, expandWeights, contextLength, heaps }),
    timeout, `load ${bundleUrl}`);
  if (reply.error) throw new RuntimeFailure(reply.error.kind, reply.error.message);
  return reply;
}

/**
 * client.generate(request) in the page. request: {input_ids | prompt | messages, options}.
 * cancelAfter: call client.cancel() once that many token events have arrived.
 * Resolves to {result, events: [{ms, text, tokenIds}], wallMs, firstTokenMs}.
 */
export async function generate(page, request, { cancelAfter = 0, timeout = TIMEOUTS.generate } = {}) {
  const reply = await withTimeout(
    page.evaluate(async ({ request, cancelAfter }) => {
      const client = window.__onnxpipe.client;
      const events = [];
      let cancel = null;
      const t0 = performance.now();
      try {
        // imageUrls: files the page fetches as Blobs for the worker to decode (vision-language);
        // audioClips: [{samples: number[], sample_rate}] made Float32Arrays here (speech bundles)
        const { imageUrls, audioClips, ...rest } = request;
        const images = imageUrls && await Promise.all(imageUrls.map(async (u) => (await fetch(u)).blob()));
        const audios = audioClips?.map((c) => ({ samples: Float32Array.from(c.samples), sample_rate: c.sample_rate }));
        const result = await client.generate({
          ...rest,
          ...(images ? { images } : {}),
          ...(audios ? { audios } : {}),
          onToken: (text, tokenIds) => {
            events.push({ ms: performance.now() - t0, text, tokenIds });
            if (cancelAfter && events.length === cancelAfter) cancel = client.cancel();
          },
        });
        await cancel;
        return { result, events, wallMs: performance.now() - t0, firstTokenMs: events[0]?.ms ?? null };
      } catch (e) {
        return { error: { kind: e?.kind ?? 'internal', message: String(e?.message ?? e) } };
      }
    }, { request, cancelAfter }),
    timeout, 'generate');
  if (reply.error) throw new RuntimeFailure(reply.error.kind, reply.error.message);
  return reply;
}

/**
 * client.speak({text, controls}) in the page. cancelAfter: cancel once that many sentences
 * have arrived. Resolves to {result, wav (number[] of bytes), samples (number[] of every
 * sentence, in order), sentences: [{ms, index, samples}], wallMs}.
 */
export async function speak(page, request, { cancelAfter = 0, timeout = TIMEOUTS.generate } = {}) {
  const reply = await withTimeout(
    page.evaluate(async ({ request, cancelAfter }) => {
      const client = window.__onnxpipe.client;
      const chunks = [];
      const sentences = [];
      let cancel = null;
      const t0 = performance.now();
      try {
        const { result, wav } = await client.speak({
          ...request,
          onAudio: (samples, sampleRate, sentence, index) => {
            chunks.push(samples);
            sentences.push({ ms: performance.now() - t0, index, sampleRate, samples: samples.length, text: sentence.text });
            if (cancelAfter && sentences.length === cancelAfter) cancel = client.cancel();
          },
        });
        await cancel;
        const samples = [];
        for (const c of chunks) for (const v of c) samples.push(v);
        return { result, wav: Array.from(wav), samples, sentences, wallMs: performance.now() - t0 };
      } catch (e) {
        return { error: { kind: e?.kind ?? 'internal', message: String(e?.message ?? e) } };
      }
    }, { request, cancelAfter }),
    timeout, 'speak');
  if (reply.error) throw new RuntimeFailure(reply.error.kind, reply.error.message);
  return reply;
}

/**
 * client.detectSpeech(samples, sampleRate, controls) in the page (a voice-activity bundle).
 * samples: an array of numbers. Resolves to {result, wallMs}.
 */
export async function detectSpeech(page, samples, sampleRate, controls = {}, { timeout = TIMEOUTS.generate } = {}) {
  const reply = await withTimeout(
    page.evaluate(async ({ samples, sampleRate, controls }) => {
      const client = window.__onnxpipe.client;
      const t0 = performance.now();
      try {
        const result = await client.detectSpeech(new Float32Array(samples), sampleRate, controls);
        return { result, wallMs: performance.now() - t0 };
      } catch (e) {
        return { error: { kind: e?.kind ?? 'internal', message: String(e?.message ?? e) } };
      }
    }, { samples: Array.from(samples), sampleRate, controls }),
    timeout, 'detectSpeech');
  if (reply.error) throw new RuntimeFailure(reply.error.kind, reply.error.message);
  return reply;
}

/**
 * client.transcribe(samples, sampleRate, onTranscript, options) in the page (a transcription
 * bundle). samples: an array of numbers at any rate. cancelAfter: cancel once that many windows
 * are done. Resolves to {result, windows: [{ms, ...window}], wallMs}.
 */
export async function transcribe(page, samples, sampleRate, options = {}, { cancelAfter = 0, timeout = TIMEOUTS.generate } = {}) {
  const reply = await withTimeout(
    page.evaluate(async ({ samples, sampleRate, options, cancelAfter }) => {
      const client = window.__onnxpipe.client;
      const windows = [];
      let cancel = null;
      const t0 = performance.now();
      try {
        const result = await client.transcribe(new Float32Array(samples), sampleRate, (window) => {
          windows.push({ ms: performance.now() - t0, ...window });
          if (cancelAfter && windows.length === cancelAfter) cancel = client.cancel();
        }, options);
        await cancel;
        return { result, windows, wallMs: performance.now() - t0 };
      } catch (e) {
        return { error: { kind: e?.kind ?? 'internal', message: String(e?.message ?? e) } };
      }
    }, { samples: Array.from(samples), sampleRate, options, cancelAfter }),
    timeout, 'transcribe');
  if (reply.error) throw new RuntimeFailure(reply.error.kind, reply.error.message);
  return reply;
}

/**
 * client.run(request) in the page (a one-pass bundle: text-to-image). request: {inputs,
 * controls, options}. cancelAfter: cancel once that many steps are done. Resolves to {result,
 * outputs: {name: {shape, values: number[]}}, images: [{width, height, channels, pixels:
 * number[], rgba: number, png: number[]}], steps: [{ms, step, steps}], wallMs}.
 */
export async function runOnce(page, request, { cancelAfter = 0, timeout = TIMEOUTS.generate } = {}) {
  const reply = await withTimeout(
    page.evaluate(async ({ request, cancelAfter }) => {
      const client = window.__onnxpipe.client;
      const steps = [];
      let cancel = null;
      const t0 = performance.now();
      try {
        const { result, outputs, images } = await client.run({
          ...request,
          onStep: (step, total) => {
            steps.push({ ms: performance.now() - t0, step, steps: total });
            if (cancelAfter && steps.length === cancelAfter) cancel = client.cancel();
          },
        });
        await cancel;
        return {
          result, steps, wallMs: performance.now() - t0,
          outputs: Object.fromEntries(Object.entries(outputs).map(([k, o]) => [k, { shape: o.shape, values: Array.from(o.values) }])),
          images: images.map((i) => ({ width: i.width, height: i.height, channels: i.channels, pixels: Array.from(i.pixels),
            rgba: i.rgba.length, png: Array.from(i.png) })),
        };
      } catch (e) {
        return { error: { kind: e?.kind ?? 'internal', message: String(e?.message ?? e) } };
      }
    }, { request, cancelAfter }),
    timeout, 'run');
  if (reply.error) throw new RuntimeFailure(reply.error.kind, reply.error.message);
  return reply;
}

// ---------------------------------------------------------------- bundles on disk

function listFiles(dir) {
  const out = [];
  const walk = (rel) => {
    for (const d of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      if (d.name.startsWith('.')) continue;
      const r = rel ? `${rel}/${d.name}` : d.name;
      if (d.isDirectory()) walk(r);
      else if (r !== 'manifest.json') out.push(r);
    }
  };
  walk('');
  return out.sort();
}

/** True when dir/manifest.json lists exactly the folder's files, with their sizes, and is newer than them. */
export function manifestIsCurrent(dir) {
  const file = path.join(dir, 'manifest.json');
  if (!fs.existsSync(file)) return false;
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return false;
  }
  const listed = new Map((manifest.files ?? []).map((f) => [f.path, f.bytes]));
  const files = listFiles(dir);
  if (files.length !== listed.size) return false;
  const written = fs.statSync(file).mtimeMs;
  for (const rel of files) {
    const st = fs.statSync(path.join(dir, rel));
    if (listed.get(rel) !== st.size || st.mtimeMs > written) return false;
  }
  return true;
}

/** Write dir/manifest.json (onnxpipe.export.manifest.write_manifest) unless it is current. */
export function ensureManifest(dir) {
  if (manifestIsCurrent(dir)) return false;
  execFileSync(python(), ['-c', 'import sys; from onnxpipe.export.manifest import write_manifest; write_manifest(sys.argv[1])', dir], {
    cwd: ROOT,
    env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return true;
}

/** Copy a bundle folder (hidden files left out) to dest and write its manifest there. */
export function copyBundle(src, dest) {
  fs.rmSync(dest, { recursive: true, force: true });
  fs.mkdirSync(dest, { recursive: true });
  for (const rel of listFiles(src)) {
    fs.mkdirSync(path.dirname(path.join(dest, rel)), { recursive: true });
    fs.copyFileSync(path.join(src, rel), path.join(dest, rel));
  }
  ensureManifest(dest);
  return dest;
}

export const FIXTURE_CACHE = path.join(ROOT, 'tests', 'fixtures', '.cache');

/**
 * One tiny fixture served to a fresh browser for a test file: registers the file's before/after
 * hooks and returns {name, source, have, expected}, which gains {server, browser, context,
 * offsite, logs} once the before hook ran. Nothing starts when the fixture isn't built.
 */
export function serveFixture(name, tag) {
  const source = path.join(FIXTURE_CACHE, name);
  const bundles = path.join(ROOT, 'build', 'e2e', `${tag}-${process.pid}`);
  const have = fs.existsSync(path.join(source, 'expected.json'));
  const fx = { name, source, have, expected: have ? JSON.parse(fs.readFileSync(path.join(source, 'expected.json'), 'utf8')) : null };
  before(async () => {
    if (!have) return;
    copyBundle(source, path.join(bundles, name));
    fx.server = await startServer({ root: siteDir(), mounts: { '/fixtures/': bundles } });
    Object.assign(fx, await launchBrowser());
  });
  after(async () => {
    await fx.browser?.close();
    await fx.server?.stop();
    fs.rmSync(bundles, { recursive: true, force: true });
  });
  return fx;
}

/**
 * A runtime page of ``serveFixture``'s browser with the fixture loaded (wasm): runs
 * ``body(page, bundleUrl)``, then checks that no request left 127.0.0.1; prints the page's last
 * log lines when anything fails.
 */
export async function onFixturePage(fx, body) {
  const page = await openRuntimePage(fx.context, fx.server.url);
  const base = `${fx.server.url}fixtures/${fx.name}/`;
  try {
    await loadBundle(page, base, { ep: 'wasm' });
    await body(page, base);
    if (fx.offsite.length) throw new Error(`requests left 127.0.0.1: ${JSON.stringify(fx.offsite)}`);
  } catch (err) {
    console.error(fx.logs.slice(-40).join('\n'));
    throw err;
  } finally {
    await page.close();
  }
}

/** Greedy-token fixture names from `python -m tests.fixtures.tiny_models --list`. */
export function fixtureNames() {
  const out = execFileSync(python(), ['-m', 'tests.fixtures.tiny_models', '--list'], {
    cwd: ROOT,
    env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) },
    encoding: 'utf8',
  });
  // fixtures marked own-tests are outside the greedy-token contract (e.g. the Chatterbox twin)
  return out.split('\n').filter((l) => !l.includes('own-tests')).map((l) => l.trim().split(/\s+/)[0]).filter(Boolean);
}

// ---------------------------------------------------------------- the site

const SOURCES = ['web', 'workers', 'py/onnxpipe', 'vite.config.ts', 'package-lock.json', 'pyproject.toml', 'tools/build_pyodide_lock.py'];

function newestMtime(p) {
  if (!fs.existsSync(p)) return 0;
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const d of fs.readdirSync(p, { withFileTypes: true })) {
    if (d.name === 'node_modules' || d.name === '__pycache__' || d.name.startsWith('.')) continue;
    newest = Math.max(newest, newestMtime(path.join(p, d.name)));
  }
  return newest;
}

/**
 * The built site for tools that are not tests (run-bundle, the benchmark): ONNXPIPE_E2E_DIST
 * when set, else dist/, rebuilt first (like `make web`) when missing or older than its sources.
 */
export function ensureSite({ log = (m) => process.stderr.write(m) } = {}) {
  if (process.env.ONNXPIPE_E2E_DIST) return path.resolve(ROOT, process.env.ONNXPIPE_E2E_DIST);
  const dist = path.join(ROOT, 'dist');
  const index = path.join(dist, 'index.html');
  const built = fs.existsSync(index) ? fs.statSync(index).mtimeMs : 0;
  const newest = Math.max(...SOURCES.map((s) => newestMtime(path.join(ROOT, s))));
  if (built && built >= newest) return dist;
  log(`# dist/ ${built ? 'is older than its sources' : 'is missing'}: vite build\n`);
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--logLevel', 'warn'], {
    cwd: ROOT,
    stdio: ['ignore', 2, 2],
  });
  return dist;
}

/**
 * The asset map (web/src/runtime-assets.ts) of the built site in ``dir`` served at ``origin``,
 * for tests that start the runtime worker by hand and send 'configure' first: Pyodide and the
 * wheel under /pyodide/, espeak-ng under /espeak-ng/, onnxruntime-web where Vite put it.
 */
export function siteAssets(dir, origin) {
  const built = fs.readdirSync(path.join(dir, 'assets'));
  const asset = (pattern) => {
    const name = built.find((f) => pattern.test(f));
    if (!name) throw new Error(`${dir}/assets has no file like ${pattern}`);
    return new URL(`/assets/${name}`, origin).href;
  };
  const at = (file) => new URL(file, origin).href;
  return {
    ort_wasm: asset(/^ort\.wasm\.bundle\.min-.*\.mjs$/),
    ort_wasm_binary: asset(/^ort-wasm-simd-threaded-[^.]*\.wasm$/),
    ort_webgpu: asset(/^ort\.webgpu\.bundle\.min-.*\.mjs$/),
    ort_webgpu_binary: asset(/^ort-wasm-simd-threaded\.asyncify-.*\.wasm$/),
    pyodide: at('/pyodide/pyodide.mjs'),
    pyodide_asm: at('/pyodide/pyodide.asm.mjs'),
    pyodide_wasm: at('/pyodide/pyodide.asm.wasm'),
    python_stdlib: at('/pyodide/python_stdlib.zip'),
    pyodide_lock: at('/pyodide/pyodide-lock.json'),
    espeak_ng: at('/espeak-ng/espeak-ng.js'),
    espeak_ng_data: at('/espeak-ng/espeak-ng.data'),
  };
}
