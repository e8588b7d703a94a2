// An onnxruntime-genai Qwen2.5-VL bundle (genai_config.json with vision + embedding sections,
// tests/fixtures/genai_qwen25_vl.py) loaded unchanged by the REAL runtime worker: the worker
// decodes the PNG, the image graph runs in onnxruntime-web, the embedding session is fed the
// image features, decoder positions are mRoPE; the greedy tokens equal the native run on the
// same file (`python -m onnxpipe run --image`), which agrees with onnxruntime-genai
// (tests/py/pipeline/test_genai_qwen25_vl.py).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, python } from './lib/browser.mjs';
import { generate, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, requestOf } from './run-bundle.mjs';

const NAME = 'genai_qwen25_vl';
const fx = serveFixture(NAME, 'genai-vl');
const { have, expected, source: SOURCE } = fx;

test('worker: a genai qwen2_5_vl bundle gives the native greedy tokens with an image and without', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const runs = Object.entries(expected.cases).map(([name, c]) => {
    const args = [SOURCE, '--input-ids', c.input_ids.join(','), '--max-new-tokens', String(expected.max_new_tokens),
      '--greedy', ...(name === 'image' ? ['--image', path.join(SOURCE, expected.image.file)] : [])];
    const native = JSON.parse(execFileSync(python(), ['-m', 'onnxpipe', 'run', ...args, '--json'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') },
    }));
    return { name, args, native };
  });
  await onFixturePage(fx, async (page, base) => {
    for (const { name, args, native } of runs) {
      const request = requestOf(parseArgs(args));
      if (name === 'image') request.imageUrls = [base + expected.image.file];
      const reply = await generate(page, request);
      assert.deepEqual(reply.result.tokens, native.tokens, `${name} prompt: browser tokens = native tokens`);
      assert.equal(reply.result.prompt_tokens, expected.cases[name].input_ids.length);
    }
  });
});
