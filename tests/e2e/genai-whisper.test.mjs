// A Whisper bundle exactly as onnxruntime-genai's model builder writes it (genai_config.json with
// model.encoder; tests/fixtures/genai_whisper.py) in the REAL runtime worker: the log-mel graph,
// the encoder and the decoder in onnxruntime-web (WASM) give onnxruntime-genai's greedy tokens
// for the fixture's audio.wav (expected.json; tests/py/models/test_genai_whisper.py natively).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { onFixturePage, serveFixture, transcribe } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { readWav } from './lib/wav.mjs';

const NAME = 'genai_whisper';
const fx = serveFixture(NAME, 'genai-whisper');
const { have, expected, source: SOURCE } = fx;

test('worker: the genai Whisper bundle gives onnxruntime-genai\'s greedy tokens', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const { samples, sampleRate } = readWav(path.join(SOURCE, expected.audio));
  // readWav scales 16-bit PCM by 1 / 32767; onnxruntime-genai (and the native test) by 1 / 32768
  const pcm = Array.from(samples, (v) => (v * 32767) / 32768);
  await onFixturePage(fx, async (page) => {
    const { result } = await transcribe(page, pcm, sampleRate, { max_new_tokens: expected.max_new_tokens });
    assert.deepEqual(result.tokens, expected.greedy_tokens, 'browser tokens = onnxruntime-genai greedy tokens');
    console.log(`# ${NAME}: ${result.tokens.length} tokens equal onnxruntime-genai's`);
  });
});
