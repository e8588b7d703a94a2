// onnxruntime-genai Qwen2.5-VL, Qwen3-VL, Gemma 3, Phi-3-vision, Phi-4-multimodal and Gemma 4
// bundles (genai_config.json with vision + embedding sections, tests/fixtures/genai_qwen25_vl.py,
// genai_qwen3vl.py, genai_gemma3.py, genai_phi3v.py, genai_phi4mm.py, genai_gemma4.py) loaded
// unchanged by the REAL runtime worker: the worker
// decodes the PNG, the image graph runs in onnxruntime-web, the embedding session is fed the
// image features, decoder positions are mRoPE (Qwen; Qwen3-VL's decoder interleaves the axes)
// or ordinary (Gemma 3, whose pixels are
// [1, 3, h, w], one image resized; Phi-3-vision: HD crops, its prompt text with <|image_1|>
// expanded to -1 ids; Phi-4-multimodal: dynamic crops with masks, <|image_1|> as id 200010;
// Gemma 4: patch rows and pixel_position_ids, a soft-token count per image); the greedy tokens
// equal the native run on the same file
// (`python -m onnxpipe run --image`), which agrees with onnxruntime-genai
// (tests/py/pipeline/test_genai_qwen25_vl.py, test_genai_qwen3vl.py, test_genai_gemma3.py,
// test_genai_phi3v.py, test_genai_phi4mm.py, test_genai_gemma4.py).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, python } from './lib/browser.mjs';
import { generate, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, requestOf } from './run-bundle.mjs';

function checkGenaiVision(NAME, tag, title) {
const fx = serveFixture(NAME, tag);
const { have, expected, source: SOURCE } = fx;
// the image files of each case (gemma3's "other" case: a second image the processor resizes;
// phi3v: expected.images by case; gemma4's "two": expected.two.files)
const imagesOf = (name) => {
  if (name === 'text') return [];
  const entry = expected.images?.[name] ?? expected[name] ?? expected.image;
  return entry.files ?? [entry.file];
};
// phi3v's ids hold -1 placeholders, which only its prompt rule makes, and phi4mm's prompts have
// <|image_N|> tags its rule replaces: give the prompt text
const promptOf = (c) => (c.input_ids.some((i) => i < 0) || c.prompt.includes('<|image_') ? ['--prompt', c.prompt]
  : ['--input-ids', c.input_ids.join(',')]);

test(title, { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const runs = Object.entries(expected.cases).map(([name, c]) => {
    const args = [SOURCE, ...promptOf(c), '--max-new-tokens', String(expected.max_new_tokens),
      '--greedy', ...imagesOf(name).flatMap((f) => ['--image', path.join(SOURCE, f)])];
    const native = JSON.parse(execFileSync(python(), ['-m', 'onnxpipe', 'run', ...args, '--json'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') },
    }));
    return { name, args, native };
  });
  await onFixturePage(fx, async (page, base) => {
    for (const { name, args, native } of runs) {
      const request = requestOf(parseArgs(args));
      if (imagesOf(name).length) request.imageUrls = imagesOf(name).map((f) => base + f);
      const reply = await generate(page, request);
      assert.deepEqual(reply.result.tokens, native.tokens, `${name} prompt: browser tokens = native tokens`);
      assert.equal(reply.result.prompt_tokens, expected.cases[name].input_ids.length);
    }
  });
});
}

checkGenaiVision('genai_qwen25_vl', 'genai-vl',
  'worker: a genai qwen2_5_vl bundle gives the native greedy tokens with an image and without');
checkGenaiVision('genai_qwen3vl', 'genai-qwen3vl',
  'worker: a genai qwen3_vl bundle gives the native greedy tokens with an image and without');
checkGenaiVision('genai_gemma3', 'genai-gemma3',
  'worker: a genai gemma3 bundle gives the native greedy tokens with an image, a resized one and without');
checkGenaiVision('genai_phi3v', 'genai-phi3v',
  'worker: a genai phi3v bundle gives the native greedy tokens with a wide image, a tall one and without');
checkGenaiVision('genai_phi4mm', 'genai-phi4mm',
  'worker: a genai phi4mm bundle gives the native greedy tokens with a wide, a tall and a large image and without');
checkGenaiVision('genai_gemma4', 'genai-gemma4',
  'worker: a genai gemma4 bundle gives the native greedy tokens with an image, a resized one, two and without');
