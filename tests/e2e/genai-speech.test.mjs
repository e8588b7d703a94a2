// An onnxruntime-genai Phi-4-multimodal bundle with audio (genai_config.json with model.speech;
// tests/fixtures/genai_phi4mm_speech.py) loaded unchanged by the REAL runtime worker: the page
// sends the 16 kHz clip as Float32 samples in generate's ``audios`` (transferred), the speech
// features graph, the speech session and the embedding session (its rows merged at the audio
// tokens) run in onnxruntime-web; the greedy tokens agree with onnxruntime-genai 0.18's
// (expected.json) under the margin rule, as natively (tests/py/pipeline/test_genai_phi4mm_speech.py);
// then an image with the clip in one prompt (the vision session too, both merges).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { assertGreedyAgrees } from './lib/agreement.mjs';
import { RuntimeFailure, generate, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { readWav } from './lib/wav.mjs';

const NAME = 'genai_phi4mm_speech';
// as the native test: the same ONNX files, the features within 1e-3 of genai's, scaled by the speech graph
const LOGIT_TOLERANCE = 1e-2;
const fx = serveFixture(NAME, 'genai-speech');
const { have, expected, source: SOURCE } = fx;

test('worker: a genai phi4mm bundle with a 16 kHz clip, and with an image and the clip, gives onnxruntime-genai\'s greedy tokens', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const c = expected.cases.clip;
  const clip = expected.clips.clip;
  const { samples, sampleRate } = readWav(path.join(SOURCE, clip.file));
  assert.equal(sampleRate, 16000);
  // readWav scales 16-bit PCM by 1 / 32767; onnxruntime-genai (and the native test) by 1 / 32768
  const pcm = Array.from(samples, (v) => (v * 32767) / 32768);
  await onFixturePage(fx, async (page, base) => {
    const { result } = await generate(page, {
      prompt: c.prompt, audioClips: [{ samples: pcm, sample_rate: sampleRate }],
      options: { max_new_tokens: expected.max_new_tokens, do_sample: false },
    });
    assert.equal(result.prompt_tokens, c.input_ids.length);
    assert.equal(result.tokens.length, c.greedy_tokens.length);
    const agreed = assertGreedyAgrees(result.tokens, c.greedy_tokens, c.margins, LOGIT_TOLERANCE);
    // the image and the clip in one prompt (<|image_1|> and <|audio_1|>): the vision and the speech
    // sessions, both merged by the embedding session, as onnxruntime-genai runs them
    const both = expected.cases.both;
    const mixed = await generate(page, {
      prompt: both.prompt, imageUrls: [base + expected.image.file], audioClips: [{ samples: pcm, sample_rate: sampleRate }],
      options: { max_new_tokens: expected.max_new_tokens, do_sample: false },
    });
    assert.equal(mixed.result.prompt_tokens, both.input_ids.length);
    const agreedBoth = assertGreedyAgrees(mixed.result.tokens, both.greedy_tokens, both.margins, LOGIT_TOLERANCE);
    // the tags with no clip: refused naming the clips, as onnxruntime-genai refuses them
    await assert.rejects(generate(page, { prompt: c.prompt, options: { max_new_tokens: 1 } }),
      (e) => e instanceof RuntimeFailure && e.kind === 'input' && /no audio clip was given/.test(e.message));
    await assert.rejects(generate(page, { prompt: c.prompt, audios: [{ samples: pcm, sample_rate: 16000 }] }),
      (e) => e instanceof RuntimeFailure && /generate: audios\[0\]: samples: expected a Float32Array/.test(e.message));
    console.log(`# ${NAME}: ${agreed.agreed} of ${c.greedy_tokens.length} tokens equal onnxruntime-genai's` +
      (agreed.split === null ? '' : ` (split at ${agreed.split}, margin ${agreed.margin})`) +
      `; image + clip: ${agreedBoth.agreed} of ${both.greedy_tokens.length}`);
  });
});
