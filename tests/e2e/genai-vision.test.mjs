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
// agree with onnxruntime-genai 0.18's recorded in each fixture's expected.json (margin rule,
// lib/agreement.mjs, at the tiny fixtures' fp32 kernel tolerance: a split only where the
// recorded top-2 margin is below 2e-3, which no step of today's cases is, so every token must be
// equal), as the native path does in
// tests/py/pipeline/test_genai_qwen25_vl.py, test_genai_qwen3vl.py, test_genai_gemma3.py,
// test_genai_phi3v.py, test_genai_phi4mm.py and test_genai_gemma4.py.
// One server, one browser and one page for all six: each fixture is its own test, loaded after
// the one before (the client starts a fresh worker for every load after the first).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { SMALL_FP32, assertGreedyAgrees } from './lib/agreement.mjs';
import { FIXTURE_CACHE, copyBundle, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, requestOf } from './run-bundle.mjs';

const FIXTURES = [
  ['genai_qwen25_vl', 'worker: a genai qwen2_5_vl bundle gives onnxruntime-genai\'s greedy tokens with an image and without'],
  ['genai_qwen3vl', 'worker: a genai qwen3_vl bundle gives onnxruntime-genai\'s greedy tokens with an image and without'],
  ['genai_gemma3', 'worker: a genai gemma3 bundle gives onnxruntime-genai\'s greedy tokens with an image, a resized one and without'],
  ['genai_phi3v', 'worker: a genai phi3v bundle gives onnxruntime-genai\'s greedy tokens with a wide image, a tall one and without'],
  ['genai_phi4mm', 'worker: a genai phi4mm bundle gives onnxruntime-genai\'s greedy tokens with a wide, a tall and a large image and without'],
  ['genai_gemma4', 'worker: a genai gemma4 bundle gives onnxruntime-genai\'s greedy tokens with an image, a resized one, two and without'],
].map(([name, title]) => {
  const source = path.join(FIXTURE_CACHE, name);
  const have = fs.existsSync(path.join(source, 'expected.json'));
  return { name, title, source, have, expected: have ? JSON.parse(fs.readFileSync(path.join(source, 'expected.json'), 'utf8')) : null };
});
const BUNDLES = path.join(ROOT, 'build', 'e2e', `genai-vision-${process.pid}`);

// the image files of each case (gemma3's "other" case: a second image the processor resizes;
// phi3v: expected.images by case; gemma4's "two": expected.two.files)
const imagesOf = (expected, name) => {
  if (name === 'text') return [];
  const entry = expected.images?.[name] ?? expected[name] ?? expected.image;
  return entry.files ?? [entry.file];
};
// phi3v's ids hold -1 placeholders, which only its prompt rule makes, and phi4mm's prompts have
// <|image_N|> tags its rule replaces: give the prompt text (as `python -m onnxpipe run` would be given it)
const promptOf = (c) => (c.input_ids.some((i) => i < 0) || c.prompt.includes('<|image_') ? ['--prompt', c.prompt]
  : ['--input-ids', c.input_ids.join(',')]);

describe('genai vision-language bundles in one page', () => {
  let server, browser, context, offsite, logs, page;
  before(async () => {
    const built = FIXTURES.filter((f) => f.have);
    if (built.length === 0) return;
    for (const f of built) copyBundle(f.source, path.join(BUNDLES, f.name));
    server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES } });
    ({ browser, context, offsite, logs } = await launchBrowser());
    page = await openRuntimePage(context, server.url);
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    fs.rmSync(BUNDLES, { recursive: true, force: true });
  });

  for (const { name: NAME, title, source, have, expected } of FIXTURES) {
    test(title, { timeout: TIMEOUTS.file }, async (t) => {
      if (!have) return t.skip(`${NAME} not built: run make fixtures`);
      const base = `${server.url}fixtures/${NAME}/`;
      try {
        await loadBundle(page, base, { ep: 'wasm' });
        for (const [name, c] of Object.entries(expected.cases)) {
          const request = requestOf(parseArgs([source, ...promptOf(c), '--max-new-tokens', String(expected.max_new_tokens), '--greedy']));
          const images = imagesOf(expected, name);
          if (images.length) request.imageUrls = images.map((f) => base + f);
          const { result } = await generate(page, request);
          assert.equal(result.prompt_tokens, c.input_ids.length, `${NAME} ${name}: prompt tokens`);
          assert.equal(result.tokens.length, c.greedy_tokens.length, `${NAME} ${name}: token count`);
          const agreed = assertGreedyAgrees(result.tokens, c.greedy_tokens, c.margins, SMALL_FP32, `${NAME} ${name}`);
          console.log(`# ${NAME} ${name}: ${agreed.agreed} of ${c.greedy_tokens.length} tokens equal onnxruntime-genai's` +
            (agreed.split === null ? '' : ` (split at ${agreed.split}, margin ${agreed.margin})`));
        }
        assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
      } catch (err) {
        console.error(logs.slice(-40).join('\n'));
        throw err;
      }
    });
  }
});
