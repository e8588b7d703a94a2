// The browser soak's small version (tests/soak/soak_browser.mjs; `make soak` runs 1,000):
// chat on a tiny fixture, speech on Piper and transcription on Whisper base, one worker per
// bundle, 20 generations mixed (transcription, the slow one, once in ten), each worker's wasm
// heaps and JS heap sampled every 2; both stay within the growth rule of tests/soak/growth.mjs.
// Also: run-bundle.mjs --repeat --json reports "memory".
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT, siteDir } from './lib/browser.mjs';
import { FIXTURE_CACHE } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import { runBundle, parseArgs } from './run-bundle.mjs';
import { BUNDLES, browserSoak, describe } from '../soak/soak_browser.mjs';

const bundles = { ...BUNDLES, chat: path.join(FIXTURE_CACHE, 'genai_llama') };
const missing = [
  [bundles.chat, 'expected.json', 'make fixtures'],
  [bundles.speech, 'en_US-joe-medium.wasm.onnx', 'make models'],
  [bundles.transcription, 'decoder.onnx', 'make models'],
].filter(([dir, file]) => !fs.existsSync(path.join(dir, file)));

test('browser soak (small): wasm and JS heaps of each worker stay within noise', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`not built: ${missing.map(([d, , how]) => `${path.relative(ROOT, d)} (${how})`).join(', ')}`);
  const out = await browserSoak({ site: siteDir(), generations: 20, every: 2, mix: 'cscscscsct', bundles });
  for (const line of describe(out)) console.log(`# ${line}`);
  assert.deepEqual(out.counts, { chat: 10, speech: 8, transcription: 2 });
  for (const [kind, r] of Object.entries(out.workers)) {
    assert.equal(r.samples, 11, kind);
    assert.ok(r.wasm_bytes.first > 0 && r.js_heap_bytes.first > 0, `${kind}: ${JSON.stringify(r)}`);
  }
  assert.ok(out.ok, describe(out).join('\n'));
});

test('run-bundle --repeat --json reports the worker\'s memory', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.some(([d]) => d === bundles.chat)) return t.skip('genai_llama not built: run make fixtures');
  process.env.ONNXPIPE_E2E_DIST ??= path.relative(ROOT, siteDir());
  const out = await runBundle(parseArgs([bundles.chat, '--input-ids', '1,2,3', '--max-new-tokens', '2', '--greedy', '--repeat', '3']));
  const { memory } = out;
  assert.equal(memory.samples, 2);   // after the first generation and the last
  for (const key of ['wasm_bytes', 'js_heap_bytes']) {
    assert.equal(memory[key].length, 2, key);
    assert.ok(memory[key][0] > 0 && memory[key][1] > 0, JSON.stringify(memory));
    assert.equal(memory[`${key.replace('_bytes', '')}_max_bytes`], Math.max(...memory[key]), key);
  }
  assert.ok(memory.wasm_bytes[1] >= memory.wasm_bytes[0], 'a wasm heap never shrinks');
});
