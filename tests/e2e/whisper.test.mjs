// Whisper base in the browser through the REAL runtime worker (Pyodide -> the resampling, mel,
// encoder and decoder graphs on onnxruntime-web WASM) against the same bundle natively
// (`python -m tests.agreement transcribe`): the same token ids, up to a near tie by the margin
// rule (WASM and native kernels differ), for a Piper-rendered sentence at 22050 Hz (resampled
// in the worker) and for a 45-second recording (two windows), and the
// sentence's words (ignoring case and punctuation); a bad request leaves the worker usable.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { WASM_VS_NATIVE, assertGreedyAgrees, nativeTranscription } from './lib/agreement.mjs';
import { RuntimeFailure, ensureManifest, loadBundle, openRuntimePage, transcribe } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { readWav } from './lib/wav.mjs';

const BUNDLE = path.join(ROOT, 'public', 'models', 'whisper-base');
const PIPER = path.join(ROOT, 'public', 'models', 'piper-en-us-joe');
const SENTENCE = 'It is cold outside. Could you close the window before we leave?';
const LONG = [
  'The quick brown fox jumps over the lazy dog.',
  'Your browser turns this text into speech without a server.',
  'We walked along the river until the sun went down.',
  'Please bring me a glass of water and a piece of bread.',
  'My sister plays the piano every evening after dinner.',
  'The train was late, so we waited on the platform for an hour.',
  'He painted the fence green and planted roses by the gate.',
  'Children were laughing in the park near the old church.',
  'The doctor said that I should sleep more and walk every day.',
  'Turn left at the bakery and you will see the station.',
  'It is cold outside. Could you close the window before we leave?',
  'Our neighbors bought a small boat last summer.',
];
const built = ['mel.onnx', 'encoder.onnx', 'decoder.onnx'].every((f) => fs.existsSync(path.join(BUNDLE, f)))
  && fs.existsSync(path.join(PIPER, 'en_US-joe-medium.onnx'));
const PYENV = { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) };

const words = (text) => text.toLowerCase().replace(/['\u2019]/g, '').replace(/[^a-z0-9 ]+/g, ' ').split(/\s+/).filter(Boolean);

/** Piper speaks ``texts`` (noise 0) into one 22050 Hz WAV, ``pause`` seconds after each. */
function renderWav(file, texts, pause) {
  const script = `
import json, sys, onnxpipe
from onnxpipe.audio import encode_wav
pipe = onnxpipe.load(sys.argv[1])
samples = []
for text in json.loads(sys.argv[3]):
    r = pipe.speak(text, noise_scale=0, noise_w=0)
    samples += list(r.samples) + [0.0] * int(float(sys.argv[4]) * r.sample_rate)
open(sys.argv[2], "wb").write(encode_wav(samples, r.sample_rate))`;
  execFileSync(python(), ['-c', script, PIPER, file, JSON.stringify(texts), String(pause)], { cwd: ROOT, env: PYENV });
}

/** Browser tokens against native ones: equal, or split only where native's top-2 margin is a near tie. */
function assertSameTokens(web, native) {
  const { split } = assertGreedyAgrees(web.result.tokens, native.tokens, native.margins, WASM_VS_NATIVE);
  if (split === null) assert.equal(web.result.tokens.length, native.tokens.length, 'the same number of tokens');
  return split;
}

describe('Whisper base: browser equals native', { skip: !built && 'run `make models` first', timeout: TIMEOUTS.file * 2 }, () => {
  let server, browser, context, offsite, page, tmp;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-whisper-'));
    renderWav(path.join(tmp, 'sentence.wav'), [SENTENCE], 0);
    renderWav(path.join(tmp, 'long.wav'), LONG, 1.0);
    ensureManifest(BUNDLE);
    server = await startServer({ root: siteDir() });
    ({ browser, context, offsite } = await launchBrowser());
    page = await openRuntimePage(context, server.url);
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('a Piper sentence at 22050 Hz: the same tokens, and its words', async () => {
    const loaded = await loadBundle(page, `${server.url}models/whisper-base/`);
    assert.equal(loaded.info.kind, 'transcription');
    assert.equal(loaded.info.sample_rate, 16000);
    const { samples, sampleRate } = readWav(path.join(tmp, 'sentence.wav'));
    assert.equal(sampleRate, 22050);
    const web = await transcribe(page, samples, sampleRate);
    const native = await nativeTranscription(BUNDLE, path.join(tmp, 'sentence.wav'));
    const split = assertSameTokens(web, native);
    assert.deepEqual(words(web.result.text), words(SENTENCE));
    if (split === null) assert.equal(web.result.text, native.text);
    assert.ok(Math.abs(web.result.audio_seconds - samples.length / sampleRate) < 1e-6);
    assert.equal(web.windows.length, 1);
    assert.deepEqual(web.windows[0].tokens, web.result.tokens);
    assert.deepEqual(offsite, []);
  });

  test('45 seconds: two windows, every sentence, the same tokens as native', async () => {
    const { samples, sampleRate } = readWav(path.join(tmp, 'long.wav'));
    assert.ok(samples.length / sampleRate > 45);
    const web = await transcribe(page, samples, sampleRate);
    const native = await nativeTranscription(BUNDLE, path.join(tmp, 'long.wav'));
    assert.equal(web.windows.length, 2);
    assert.equal(native.windows, 2);
    assertSameTokens(web, native);
    assert.deepEqual(words(web.result.text), LONG.flatMap(words));
    assert.ok(web.windows[0].ms < web.wallMs, 'the first window arrived before the result');
  });

  test('bad requests fail clearly and the worker stays usable', async () => {
    await assert.rejects(transcribe(page, [], 16000), (e) => e instanceof RuntimeFailure && e.kind === 'input' && /empty/.test(e.detail));
    await assert.rejects(transcribe(page, [0, 0.1], 0), (e) => e instanceof RuntimeFailure && /sample_rate/.test(e.detail));
    const { samples, sampleRate } = readWav(path.join(tmp, 'sentence.wav'));
    const again = await transcribe(page, samples, sampleRate);
    assert.deepEqual(words(again.result.text), words(SENTENCE));
  });
});
