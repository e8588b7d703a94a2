// A vision-language bundle in the REAL runtime worker: two PNG images of different sizes are
// decoded by the worker (createImageBitmap), preprocessed by an ONNX graph in onnxruntime-web,
// run through the vision session one by one, merged at the image tokens and laid out as mRoPE
// positions; the greedy tokens equal `python -m onnxpipe run --image` on the same files, run
// here (and transformers' generate, expected.json; tests/py/pipeline/test_vision_language.py).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, python } from './lib/browser.mjs';
import { generate, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, requestOf } from './run-bundle.mjs';

const NAME = 'qwen2_vl';
const fx = serveFixture(NAME, 'vl');
const { have, expected, source: SOURCE } = fx;

test('worker: two images of different sizes give the native greedy tokens', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const files = expected.images.map((i) => i.file);
  // the CLI's words: the native run takes them as flags, the worker as run-bundle.mjs's request
  const args = [SOURCE, '--input-ids', expected.input_ids.join(','), '--max-new-tokens', String(expected.max_new_tokens),
    '--greedy', ...files.flatMap((f) => ['--image', path.join(SOURCE, f)])];
  const native = JSON.parse(execFileSync(python(), ['-m', 'onnxpipe', 'run', ...args, '--json'], {
    cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') },
  }));
  await onFixturePage(fx, async (page, base) => {
    const a = parseArgs(args);
    assert.deepEqual(a.images, files.map((f) => path.join(SOURCE, f)));
    const request = { ...requestOf(a), imageUrls: files.map((f) => base + f) };
    const reply = await generate(page, request);
    assert.deepEqual(reply.result.tokens, native.tokens, 'browser tokens = native tokens');
    assert.deepEqual(native.tokens, expected.greedy_tokens, 'native tokens = transformers generate');
    assert.equal(reply.result.prompt_tokens, expected.expanded_input_ids.length, 'image tokens expanded per grid');
  });
});
