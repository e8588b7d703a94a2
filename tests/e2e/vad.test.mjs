// Silero VAD (public/models/silero-vad) in the browser through the REAL runtime worker
// (Pyodide -> onnxruntime-web WASM) against the same bundle natively (CPython -> onnxruntime),
// on silence + a sentence + silence + a sentence + silence spoken by the Piper voice
// (tests/vad_reference.py writes the WAV and the native answers):
// - detectSpeech: the same segments and events, probabilities within PROBABILITY_TOLERANCE;
//   a control reaches the segmenter;
// - the live path the voice page uses (client.listen on a MessagePort fed 16 kHz chunks of odd
//   sizes, as the capture worklet posts them): the same speech events;
// - audio at another rate is resampled in the engine; bad input leaves the worker usable;
// - `run-bundle.mjs BUNDLE --audio x.wav --json` prints what `python -m onnxpipe vad --json` does.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { RuntimeFailure, detectSpeech, ensureManifest, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { readWav } from './lib/wav.mjs';

const BUNDLE = path.join(ROOT, 'public', 'models', 'silero-vad');
const PIPER = path.join(ROOT, 'public', 'models', 'piper-en-us-joe');
const PYENV = { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) };
const built = fs.existsSync(path.join(BUNDLE, 'silero_vad_v5.onnx')) && fs.existsSync(path.join(PIPER, 'en_US-joe-medium.onnx'));
const MERGE = { min_silence_ms: 2000 }; // longer than the pause between the sentences: one segment
// onnxruntime-web's WASM kernels and native onnxruntime's differ in the last bits of a float
const PROBABILITY_TOLERANCE = 1e-4;
const TIME_TOLERANCE = 1e-6;

let server, browser, page, offsite, wav, native, samples, sampleRate, dir;

before(async () => {
  if (!built) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-e2e-vad-'));
  wav = path.join(dir, 'speech.wav');
  const out = execFileSync(python(), ['-m', 'tests.vad_reference', wav, '{}', JSON.stringify(MERGE)],
    { cwd: ROOT, env: PYENV, encoding: 'utf8', timeout: TIMEOUTS.native });
  native = JSON.parse(out).native;
  ({ samples, sampleRate } = readWav(wav));
  ensureManifest(BUNDLE);
  server = await startServer({ root: siteDir(), mounts: { '/models/silero-vad/': BUNDLE } });
  let context;
  ({ browser, context, offsite } = await launchBrowser());
  page = await openRuntimePage(context, server.url);
});
after(async () => {
  await browser?.close();
  await server?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function sameTimes(got, want, what) {
  assert.equal(got.length, want.length, `${what}: ${JSON.stringify(got)} vs ${JSON.stringify(want)}`);
  got.forEach((g, i) => g.forEach((v, j) => assert.ok(Math.abs(v - want[i][j]) <= TIME_TOLERANCE,
    `${what}[${i}][${j}]: ${v} vs ${want[i][j]}`)));
}

describe('silero-vad in the browser', { skip: built ? false : 'public/models/silero-vad or piper-en-us-joe not built: run make models', timeout: TIMEOUTS.file }, () => {
  test('loads as a voice-activity bundle with its controls', async () => {
    const { info } = await loadBundle(page, `${server.url}models/silero-vad/`, { ep: 'wasm' });
    assert.equal(info.kind, 'voice-activity');
    assert.equal(info.sample_rate, 16000);
    assert.equal(info.sessions.vad.provider, 'wasm');
    assert.deepEqual(info.controls.map((c) => c.name),
      ['threshold', 'negative_threshold', 'min_silence_ms', 'speech_pad_ms', 'min_speech_ms']);
  });

  test('detectSpeech equals native: segments, events and per-chunk probabilities', async () => {
    const { result } = await detectSpeech(page, samples, sampleRate);
    const want = native[0];
    assert.equal(want.segments.length, 2);
    sameTimes(result.segments, want.segments, 'segments');
    assert.deepEqual(result.events.map((e) => e.type), want.events.map((e) => e.type));
    sameTimes(result.events.map((e) => [e.start, e.end ?? 0, e.time]), want.events.map((e) => [e.start, e.end ?? 0, e.time]), 'events');
    assert.equal(result.probabilities.length, want.probabilities.length);
    const worst = Math.max(...result.probabilities.map((p, i) => Math.abs(p - want.probabilities[i])));
    assert.ok(worst <= PROBABILITY_TOLERANCE, `largest probability difference ${worst}`);
    assert.equal(result.audio_seconds, want.audio_seconds);
    assert.ok(result.compute_seconds > 0 && result.compute_seconds < result.audio_seconds, `${result.compute_seconds} s`);
    // a control reaches the segmenter
    const merged = (await detectSpeech(page, samples, sampleRate, MERGE)).result;
    sameTimes(merged.segments, native[1].segments, 'merged segments');
    assert.equal(merged.segments.length, 1);
    assert.equal(offsite.length, 0, `requests left 127.0.0.1: ${offsite.join(', ')}`);
  });

  test('streamed chunks of odd sizes (the listen path) give the same events', async () => {
    const expected = native[0].events.length;
    const events = await page.evaluate(async ({ samples, expected, timeout }) => {
      const client = window.__onnxpipe.client;
      const channel = new MessageChannel();
      const seen = [];
      let failed = null;
      await client.listen(channel.port2, (e) => seen.push({ type: e.type, start: e.start, end: e.end }), (e) => { failed = e; });
      const audio = new Float32Array(samples);
      const sizes = [1, 700, 333, 512, 1500, 17];
      for (let at = 0, k = 0; at < audio.length; k++) {
        const n = Math.min(sizes[k % sizes.length], audio.length - at);
        channel.port1.postMessage({ type: 'chunk', samples: audio.slice(at, at + n), at });
        at += n;
      }
      // chunks still queued when listening stops are dropped: wait for the events (or a failure)
      const deadline = performance.now() + timeout;
      await new Promise((resolve) => {
        const check = () => (seen.length >= expected || failed || performance.now() > deadline ? resolve() : setTimeout(check, 20));
        check();
      });
      await new Promise((r) => setTimeout(r, 200));   // no further events come
      await client.stopListening();
      if (failed) throw failed;
      return seen;
    }, { samples: Array.from(samples), expected, timeout: TIMEOUTS.generate });
    const want = native[0].events.map((e) => ({ type: e.type, start: e.start, end: e.end ?? null }));
    assert.deepEqual(events.map((e) => e.type), want.map((e) => e.type));
    sameTimes(events.map((e) => [e.start, e.end ?? 0]), want.map((e) => [e.start, e.end ?? 0]), 'streamed events');
  });

  test('audio at another rate is resampled in the engine; bad input leaves the worker usable', async () => {
    const doubled = new Float32Array(2 * samples.length);   // 32 kHz by linear interpolation
    for (let i = 0; i < samples.length; i++) {
      doubled[2 * i] = samples[i];
      doubled[2 * i + 1] = (samples[i] + (samples[i + 1] ?? 0)) / 2;
    }
    const { result: at32k } = await detectSpeech(page, doubled, 32000);
    assert.equal(at32k.segments.length, native[0].segments.length);
    at32k.segments.forEach(([a, b], i) => {
      assert.ok(Math.abs(a - native[0].segments[i][0]) < 0.1 && Math.abs(b - native[0].segments[i][1]) < 0.1,
        `32 kHz ${JSON.stringify(at32k.segments)} vs 16 kHz ${JSON.stringify(native[0].segments)}`);
    });
    await assert.rejects(detectSpeech(page, samples.subarray(0, 4096), 0), (error) => {
      assert.ok(error instanceof RuntimeFailure && error.kind === 'input', String(error));
      assert.match(error.detail, /sample_rate: expected a positive integer/);
      return true;
    });
    await assert.rejects(detectSpeech(page, samples.subarray(0, 4096), sampleRate, { treshold: 0.5 }),
      /unknown control "treshold". Did you mean "threshold"/);
    const { result } = await detectSpeech(page, samples, sampleRate);
    sameTimes(result.segments, native[0].segments, 'segments after errors');
  });

  test('run-bundle --audio --json prints the native vad command\'s segments', () => {
    const env = { ...PYENV, ONNXPIPE_E2E_DIST: siteDir() };
    const browserOut = JSON.parse(execFileSync(process.execPath, [path.join(ROOT, 'tests', 'e2e', 'run-bundle.mjs'), BUNDLE,
      '--audio', wav, '--json'], { cwd: ROOT, env, encoding: 'utf8', timeout: TIMEOUTS.load }));
    const nativeOut = JSON.parse(execFileSync(python(), ['-m', 'onnxpipe', 'vad', BUNDLE, '--audio', wav, '--json'],
      { cwd: ROOT, env: PYENV, encoding: 'utf8', timeout: TIMEOUTS.native }));
    sameTimes(browserOut.segments, nativeOut.segments, 'run-bundle segments');
    assert.equal(browserOut.audio_seconds, nativeOut.audio_seconds);
    assert.equal(browserOut.chunks, nativeOut.chunks);
    assert.ok(browserOut.compute_seconds > 0);
  });
});
