// The Piper voice in the browser through the REAL runtime worker (Pyodide -> espeak-ng wasm ->
// onnxruntime-web WASM) against the same bundle natively (CPython -> espeak-ng -> onnxruntime):
// same phoneme ids and the same samples (noise scales 0) for the same text; the WAV the worker
// encodes; the headless runner's --text form; bad input leaves the worker usable. And the
// Chatterbox-shaped twin (four sessions, KV cache, final decoder, the bundle's plugin) in
// Pyodide: the same speech tokens and waveform as its numpy oracle.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, RuntimeFailure, copyBundle, ensureManifest, loadBundle, openRuntimePage, speak } from './lib/runtime.mjs';
import { assertDecisive } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = path.join(ROOT, 'public', 'models', 'piper-en-us-joe');
const TEXT = 'Hello, world! It costs forty dollars today: cheap; is it not?';
const QUIET = { noise_scale: 0, noise_w: 0 };
const built = fs.existsSync(path.join(BUNDLE, 'en_US-joe-medium.onnx'));
const PYENV = { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) };

// Frame durations of the browser and native kernels differ by far less than this (in frames):
// a sentence's length can differ only where a duration lies this close to a whole frame.
const DURATION_TOLERANCE = 1e-3;
// measured 1.7 dB (the voice's default noise against noise 0 is 3.4 dB; the same file 0.1 dB)
const WASM_VARIANT_MAX_DB = 2.5;

/** Native speak(): {ids, counts (samples) and durationMargins per sentence, samples, sample_rate};
 * variant "wasm" opens the file the browser opens (the int8 variant), else the voice's own. */
function nativeSpeak(text, controls, variant = null) {
  const script = `
import json, sys, onnxpipe
from pathlib import Path
from tests.piper_reference import duration_margins
pipe = onnxpipe.load(sys.argv[1], variant=sys.argv[4] or None)
controls = json.loads(sys.argv[3])
r = pipe.speak(sys.argv[2], **controls)
defaults = {c.name: c.default for c in pipe.controls}
scales = [controls.get(c, defaults[c]) for c in ("noise_scale", "length_scale", "noise_w")]
voice = Path(sys.argv[1]) / ("en_US-joe-medium.wasm.onnx" if sys.argv[4] == "wasm" else "en_US-joe-medium.onnx")
print(json.dumps({"ids": [s.ids for s in r.sentences], "counts": [s.samples for s in r.sentences],
                  "durationMargins": duration_margins(voice, [s.ids for s in r.sentences], scales),
                  "samples": list(r.samples), "sample_rate": r.sample_rate}))`;
  return JSON.parse(execFileSync(python(), ['-c', script, BUNDLE, text, JSON.stringify(controls), variant ?? ''],
    { cwd: ROOT, env: PYENV, encoding: 'utf8', maxBuffer: 64 << 20 }));
}

/** Spectral distance in dB between ``samples`` (float, 22050 Hz) and the voice file's own
 * audio of ``text`` natively (tests/py/export/test_piper_variant.py's measure). */
function spectralDistance(samples, text, controls) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-speech-'));
  const file = path.join(dir, 'web.f32');
  try {
    fs.writeFileSync(file, Buffer.from(Float32Array.from(samples).buffer));
    const script = `
import json, sys, numpy as np, onnxpipe
from tests.py.export.test_piper_variant import spectral_distance
pipe = onnxpipe.load(sys.argv[1], variant="cpu")
native = np.array(pipe.speak(sys.argv[2], **json.loads(sys.argv[3])).samples, np.float32)
print(spectral_distance(np.fromfile(sys.argv[4], np.float32), native))`;
    return Number(execFileSync(python(), ['-c', script, BUNDLE, text, JSON.stringify(controls), file],
      { cwd: ROOT, env: PYENV, encoding: 'utf8' }).trim());
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Fields of a 16-bit PCM WAV header. */
function wavHeader(bytes) {
  const b = Buffer.from(bytes);
  return {
    riff: b.toString('ascii', 0, 4), wave: b.toString('ascii', 8, 12), format: b.readUInt16LE(20),
    channels: b.readUInt16LE(22), rate: b.readUInt32LE(24), bits: b.readUInt16LE(34),
    data: b.toString('ascii', 36, 40), dataBytes: b.readUInt32LE(40), size: b.length,
  };
}

describe('Piper voice: browser equals native', { skip: !built && 'run `make models` first', timeout: TIMEOUTS.file }, () => {
  let server, browser, context, offsite, page;
  before(async () => {
    ensureManifest(BUNDLE);
    server = await startServer({ root: siteDir() });
    ({ browser, context, offsite } = await launchBrowser());
    page = await openRuntimePage(context, server.url);
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  test('the int8 file the browser opens by default: the same ids and lengths as native, and it sounds like the voice file', async () => {
    const loaded = await loadBundle(page, `${server.url}models/piper-en-us-joe/`);
    assert.equal(loaded.info.sessions.voice.file, 'en_US-joe-medium.wasm.onnx');
    const web = await speak(page, { text: TEXT, controls: QUIET });
    const native = nativeSpeak(TEXT, QUIET, 'wasm');
    const plain = nativeSpeak(TEXT, QUIET);
    assert.deepEqual(web.result.sentences.map((s) => s.ids), native.ids);
    // the durations come from the encoder and duration predictor, which stay fp32: same lengths
    assert.deepEqual(native.counts, plain.counts);
    assert.deepEqual(web.result.sentences.map((s) => s.samples), native.counts);
    // int8 rounding moves phases, so samples can't be compared one by one: the spectral distance
    // (tests/py/export/test_piper_variant.py) to the voice's own file, natively
    const dB = spectralDistance(web.samples, TEXT, QUIET);
    assert.ok(dB <= WASM_VARIANT_MAX_DB, `int8 file in the browser vs the voice file natively: ${dB.toFixed(2)} dB`);
    console.log(`# int8 file in the browser vs the voice file natively: ${dB.toFixed(2)} dB (bound ${WASM_VARIANT_MAX_DB})`);
  });

  test('same phoneme ids and samples within 1e-4 on the voice file itself, and a valid WAV', async () => {
    const loaded = await loadBundle(page, `${server.url}models/piper-en-us-joe/`, { variant: 'cpu' });
    assert.equal(loaded.info.sessions.voice.file, 'en_US-joe-medium.onnx');
    assert.equal(loaded.info.kind, 'speech');
    assert.equal(loaded.info.sample_rate, 22050);
    assert.deepEqual(loaded.info.controls.map((c) => c.name), ['noise_scale', 'length_scale', 'noise_w']);
    const web = await speak(page, { text: TEXT, controls: QUIET });
    const native = nativeSpeak(TEXT, QUIET);
    assert.deepEqual(web.result.sentences.map((s) => s.ids), native.ids);
    assert.equal(native.ids.length, 2);
    // sentence by sentence: the same length and samples within 1e-4, unless a duration of that
    // sentence sits on a frame boundary (then the lengths may differ and samples can't be lined up)
    const webCounts = web.result.sentences.map((s) => s.samples);
    let start = 0;
    let webStart = 0;
    for (let k = 0; k < native.counts.length; k++) {
      if (webCounts[k] === native.counts[k]) {
        let worst = 0;
        for (let i = 0; i < native.counts[k]; i++) worst = Math.max(worst, Math.abs(web.samples[webStart + i] - native.samples[start + i]));
        assert.ok(worst <= 1e-4, `sentence ${k}: max |browser - native| = ${worst}`);
      } else {
        assert.ok(native.durationMargins[k] < DURATION_TOLERANCE,
          `sentence ${k}: ${webCounts[k]} samples in the browser, ${native.counts[k]} natively, yet every duration is ` +
          `${native.durationMargins[k].toFixed(4)} frames or more from a whole frame`);
        console.log(`# sentence ${k}: a duration ${native.durationMargins[k].toExponential(2)} frames from a whole frame; lengths differ`);
      }
      start += native.counts[k];
      webStart += webCounts[k];
    }
    assert.equal(web.samples.length, webStart);
    assert.deepEqual(web.sentences.map((s) => s.index), [0, 1]);
    assert.ok(web.sentences.every((s) => s.sampleRate === 22050));
    const h = wavHeader(web.wav);
    assert.deepEqual([h.riff, h.wave, h.format, h.channels, h.rate, h.bits, h.data], ['RIFF', 'WAVE', 1, 1, 22050, 16, 'data']);
    assert.equal(h.dataBytes, 2 * web.samples.length);
    assert.equal(h.size, 44 + h.dataBytes);
    assert.equal(web.result.finish_reason, 'done');
    assert.ok(web.result.real_time_factor > 0 && web.result.compute_seconds > 0);
    assert.deepEqual(offsite, []);
  });

  test('bad input is a typed error and the voice speaks afterwards', async () => {
    await assert.rejects(speak(page, { text: TEXT, controls: { noise: 0 } }),
      (e) => e instanceof RuntimeFailure && e.kind === 'input' && /unknown control "noise"/.test(e.detail));
    await assert.rejects(speak(page, { text: '   ' }), (e) => e.kind === 'input');
    await assert.rejects(page.evaluate(() => window.__onnxpipe.client.generate({ prompt: 'hi' })),
      /pipeline input|loop is "single_pass"/);
    const again = await speak(page, { text: 'Still here.', controls: QUIET });
    assert.ok(again.samples.length > 10000);
  });

  test('cancel stops between sentences with what was made', async () => {
    const long = 'One sentence first. Then a second one. And a third to be sure. A fourth as well.';
    const run = await speak(page, { text: long, controls: QUIET }, { cancelAfter: 1 });
    assert.equal(run.result.finish_reason, 'cancelled');
    assert.ok(run.result.sentences.length >= 1 && run.result.sentences.length < 4);
    assert.equal(wavHeader(run.wav).dataBytes, 2 * run.samples.length);
  });
});

test('run-bundle.mjs --text --out --json prints the audio figures and writes the WAV',
  { skip: !built && 'run `make models` first', timeout: TIMEOUTS.file }, () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-tts-')), 'x.wav');
    const proc = spawnSync(process.execPath, [path.join(ROOT, 'tests', 'e2e', 'run-bundle.mjs'), BUNDLE, '--text', 'Hi there.',
      '--out', out, '--set', 'noise_scale=0', '--json'], { cwd: ROOT, encoding: 'utf8', timeout: TIMEOUTS.file });
    assert.equal(proc.status, 0, proc.stderr);
    const report = JSON.parse(proc.stdout.trim().split('\n').pop());
    for (const key of ['audio_seconds', 'compute_seconds', 'sample_rate']) assert.equal(typeof report[key], 'number', key);
    assert.equal(report.sample_rate, 22050);
    const h = wavHeader(fs.readFileSync(out));
    assert.equal(h.rate, 22050);
    assert.ok(Math.abs(h.dataBytes / 2 / 22050 - report.audio_seconds) < 1e-3);
    fs.rmSync(path.dirname(out), { recursive: true, force: true });
  });

const TWIN = path.join(FIXTURE_CACHE, 'chatterbox_twin');
const twinBuilt = fs.existsSync(path.join(TWIN, 'expected.json'));

describe('Chatterbox twin: plugin glue and final decoder in the browser',
  { skip: !twinBuilt && 'run `make fixtures` first', timeout: TIMEOUTS.file }, () => {
    const copy = path.join(ROOT, 'build', 'e2e', `twin-${process.pid}`);
    let server, browser, context, offsite, page;
    before(async () => {
      copyBundle(TWIN, copy);
      server = await startServer({ root: siteDir(), mounts: { '/twin/': copy } });
      ({ browser, context, offsite } = await launchBrowser());
      page = await openRuntimePage(context, server.url);
    });
    after(async () => {
      await browser?.close();
      await server?.stop();
      fs.rmSync(copy, { recursive: true, force: true });
    });

    test('speech tokens and waveform equal the oracle', async () => {
      const expected = JSON.parse(fs.readFileSync(path.join(TWIN, 'expected.json'), 'utf8'));
      const voice = JSON.parse(fs.readFileSync(path.join(TWIN, 'voice.json'), 'utf8'));
      assertDecisive(expected, 'chatterbox_twin');      // so its speech tokens must match exactly
      const loaded = await loadBundle(page, `${server.url}twin/`);
      assert.equal(loaded.info.kind, 'speech');
      assert.equal(loaded.info.structure, 'plugin');
      const { values, shape } = voice.audio_values;
      const run = await speak(page, { text: expected.text, inputs: { audio_values: { values, shape } } });
      const [sentence] = run.result.sentences;
      assert.deepEqual(sentence.ids, expected.input_ids);
      assert.deepEqual(sentence.tokens, expected.greedy_tokens);
      assert.equal(run.samples.length, expected.waveform.length);
      let worst = 0;
      for (let i = 0; i < run.samples.length; i++) worst = Math.max(worst, Math.abs(run.samples[i] - expected.waveform[i]));
      assert.ok(worst <= 1e-4, `max |browser - oracle| = ${worst}`);
      assert.equal(run.result.sample_rate, 24000);
      assert.deepEqual(offsite, []);
      await assert.rejects(speak(page, { text: expected.text }),
        (e) => e.kind === 'input' && /audio_values/.test(e.detail));
    });
  });
