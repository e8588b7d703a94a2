// A transformers.js / Optimum Whisper folder (tjs_whisper: encoder_model.onnx + If-merged
// decoder_model_merged.onnx, no pipeline.json) in the REAL runtime worker (WASM): the fixture's
// log-mel input_features go in as options.inputs.audio_features; the greedy tokens equal
// transformers' generate (expected.json, margin rule; tests/py/models/test_tjs_whisper.py is
// the native half). Then the transcribe verb on audio.wav: the features made in the worker as
// WhisperFeatureExtractor makes them (preprocessor_config.json) give transformers' tokens too.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { generate, onFixturePage, serveFixture, transcribe } from './lib/runtime.mjs';
import { WASM_VS_NATIVE, assertGreedyAgrees } from './lib/agreement.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { readWav } from './lib/wav.mjs';

const NAME = 'tjs_whisper';
const fx = serveFixture(NAME, 'tjs-whisper');
const { have, expected, source: SOURCE } = fx;

/** A little-endian float32 .npy (numpy's format 1.0): {values, shape}. */
function readNpy(file) {
  const buf = fs.readFileSync(file);
  const headerLength = buf.readUInt16LE(8);
  const header = buf.subarray(10, 10 + headerLength).toString('latin1');
  assert.match(header, /'descr': '<f4'/);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter((s) => s.trim()).map(Number);
  const data = buf.subarray(10 + headerLength);
  const values = Array.from(new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length)));
  assert.equal(values.length, shape.reduce((a, b) => a * b, 1));
  return { values, shape };
}

test('worker: encoder-decoder folder gives transformers generate tokens, from features and from a waveform', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const features = readNpy(path.join(SOURCE, expected.input_features));
  await onFixturePage(fx, async (page) => {
    const request = { options: { max_new_tokens: expected.max_new_tokens, inputs: { audio_features: features } } };
    const { result } = await generate(page, request);
    assert.equal(result.tokens.length, expected.max_new_tokens);
    assertGreedyAgrees(result.tokens, expected.greedy_tokens, expected.margins, WASM_VS_NATIVE, `${NAME} wasm`);
    const again = await generate(page, request);   // a new call: the cross-attention keys/values made again
    assert.deepEqual(again.result.tokens, result.tokens);
    const { samples, sampleRate } = readWav(path.join(SOURCE, expected.audio));
    // readWav scales 16-bit PCM by 1 / 32767; the fixture's extractor (and the native test) by 1 / 32768
    const pcm = Array.from(samples, (v) => (v * 32767) / 32768);
    const heard = await transcribe(page, pcm, sampleRate, { max_new_tokens: expected.max_new_tokens });
    assertGreedyAgrees(heard.result.tokens, expected.audio_greedy_tokens, expected.audio_margins, WASM_VS_NATIVE,
      `${NAME} wasm transcribe`);
  });
});
