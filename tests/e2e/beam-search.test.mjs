// Beam search and min_new_tokens in the REAL runtime worker (Pyodide -> onnxruntime-web, the
// KV cache reordered per beam by an engine graph): the returned sequences and their scores equal
// the native run of `python -m onnxpipe run` with the same flags (whose equality with
// transformers is tests/py/loops/test_beam_search.py). The request is the one run-bundle.mjs
// builds from those very flags, so its options are checked too.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, python } from './lib/browser.mjs';
import { generate, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { parseArgs, requestOf } from './run-bundle.mjs';

const NAME = 'genai_llama';   // GroupQueryAttention with a shared KV buffer: the harder reorder
const fx = serveFixture(NAME, 'beam');
const { have, expected, source: SOURCE } = fx;

/** The flags both runs get: an extra end id the model emits early, so beams end at different
 * lengths and min_new_tokens has something to mask. */
function flags(e) {
  return ['--input-ids', e.input_ids.join(','), '--max-new-tokens', '10', '--num-beams', '3',
    '--num-return-sequences', '3', '--length-penalty', '0.8', '--early-stopping', 'never',
    '--min-new-tokens', '3', '--no-repeat-ngram-size', '3'];
}

test('worker beam search + min_new_tokens equals the native run', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`${NAME} not built: run make fixtures`);
  const end = expected.greedy_tokens[1];
  const request = requestOf(parseArgs([SOURCE, ...flags(expected)]));
  request.options.stop_token_ids = [end];
  assert.deepEqual(request.options, { num_beams: 3, num_return_sequences: 3, length_penalty: 0.8, early_stopping: 'never',
    min_new_tokens: 3, no_repeat_ngram_size: 3, max_new_tokens: 10, stop_token_ids: [end] });
  await onFixturePage(fx, async (page) => {
    const { result } = await generate(page, request);
    // native: the same request through the Python API (the CLI's flags are tests/py's)
    const script = 'import json, sys, onnxpipe\n' +
      'r = json.loads(sys.argv[2])\n' +
      'out = onnxpipe.load(sys.argv[1]).generate(input_ids=r["input_ids"], **r["options"])\n' +
      'print(json.dumps(out.to_dict()))';
    const native = JSON.parse(execFileSync(python(), ['-c', script, SOURCE, JSON.stringify(request)], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') },
    }));
    assert.equal(result.sequences.length, 3);
    assert.deepEqual(result.sequences.map((s) => s.tokens), native.sequences.map((s) => s.tokens),
      'browser beams = native beams');
    for (const [i, s] of result.sequences.entries()) {
      assert.ok(Math.abs(s.score - native.sequences[i].score) < 1e-3, `score ${s.score} vs native ${native.sequences[i].score}`);
    }
    assert.deepEqual(result.tokens, native.tokens);
    assert.ok(!result.sequences.some((s) => s.tokens.slice(0, 3).includes(end)), 'no end id before min_new_tokens');
    console.log(`# browser beams: ${JSON.stringify(result.sequences.map((s) => [s.tokens, s.score]))}`);
  });
});
