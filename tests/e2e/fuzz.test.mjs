// Browser half of the fuzzing (the native half: tests/py/fuzz/): a few hundred bad requests,
// drawn from a seeded PRNG, posted straight to ONE runtime worker (client.runtime.worker, behind the
// RuntimeClient's typed API): malformed messages, wrong types, unknown request types, bad bundle
// URLs, bad pipeline.json files served from the test's folder, bad inputs and options. Every one
// must be answered by an error with a kind and a message (no crash, no silence, no fatal); then
// the same worker still generates the fixture's greedy tokens. ONNXPIPE_FUZZ=long: 10x the cases.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ROOT } from './lib/browser.mjs';
import { ensureManifest, onFixturePage, serveFixture } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const NAME = 'genai_llama';
const fx = serveFixture(NAME, 'fuzz');
const CASES = 300 * (process.env.ONNXPIPE_FUZZ === 'long' ? 10 : 1);
const SEED = Number(process.env.ONNXPIPE_FUZZ_SEED ?? 14);
const KINDS = new Set(['config', 'bundle', 'input', 'engine', 'network', 'integrity', 'text']);

/** mulberry32: a small seeded PRNG, so a failing case is drawn again from its seed. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Bad pipeline.json files, each a bundle folder beside the fixture (served under /fixtures/). */
function writeBadBundles(dir) {
  const good = JSON.parse(fs.readFileSync(path.join(fx.source, 'genai_config.json'), 'utf8'));
  const variants = {
    'bad-json': '{"model": ',
    'bad-array': '[1, 2, 3]',
    'bad-pipeline-types': JSON.stringify({ format: 'onnxpipe/v2', sessions: 5, flow: 'x' }),
    'bad-pipeline-empty': '{}',
    'bad-genai-type': JSON.stringify({ ...good, model: { ...good.model, type: 42 } }),
    'bad-genai-file': JSON.stringify({ ...good, model: { ...good.model, decoder: { ...good.model.decoder, filename: '../../etc/passwd' } } }),
  };
  const names = [];
  for (const [name, text] of Object.entries(variants)) {
    const folder = path.join(dir, name);
    fs.mkdirSync(folder, { recursive: true });
    const file = name.startsWith('bad-genai') ? 'genai_config.json' : 'pipeline.json';
    fs.writeFileSync(path.join(folder, file), text);
    ensureManifest(folder);
    names.push(name);
  }
  return names;
}

/** One bad call (a plain object posted to the worker: {id, verb, args}), or a non-object message. */
function drawCase(rand, base, badBundles, id) {
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const junk = () => pick([null, -1, 1.5, 'x', '', true, [], {}, [1, 'a'], { a: 1 }, 2 ** 40, NaN]);
  const present = () => pick([-1, 1.5, true, {}, [1, 'a'], { a: 1 }]);   // null or '' would mean "absent"
  const family = pick(['message', 'verb', 'args', 'load', 'generate', 'options', 'other-kind', 'storage']);
  switch (family) {
    case 'message': return pick([null, 7, 'generate', [1, 2], { id }, { verb: 'generate' }, { verb: 'generate', id: 'one' },
      { id, verb: 'generate', args: pick([7, 'x', [1], null]) }, { id, verb: 'cancel', args: {}, extra: 1 }, { id, type: 'generate' }]);
    case 'verb': return { id, verb: pick(['', 'Generate', 'eval', 'load ', 'detectSpeech', `t${Math.floor(rand() * 1e6)}`, 42, null]), args: {} };
    case 'args': return { id, verb: pick(['generate', 'speak', 'load', 'memory']), args: { [pick(['inputIds', 'bundleUrl', 'sampleRate', 'type', 'id'])]: 1 } };
    case 'load': return {
      id, verb: 'load', args: {
        bundle_url: pick([junk(), `${base}nothing-here/`, 'http://127.0.0.1:1/x/', 'data:text/plain,hi', `${base}${pick(badBundles)}/`,
          `${base}${pick(badBundles)}/`, `${base}${NAME}/`.replace(NAME, `${NAME}-missing`)]),
        ...(rand() < 0.3 ? { ep: pick(['webgl', 'cuda', junk()]) } : {}),
        ...(rand() < 0.2 ? { dtype: pick(['q17', junk()]) } : {}),
      },
    };
    case 'generate': return {
      id, verb: 'generate', args: {
        ...pick([
          { input_ids: pick([present(), [-5], [1e9], [1.5, 2], ['a'], [], [[1]]]) },
          { prompt: present() },
          // null messages are absent (a bundle with tokens.bos then generates from it); '' and [] are given
          { messages: pick([present(), '', [], [{ role: 'wizard', content: 'hi' }], [{ role: 'user' }], [{ role: 'user', content: 5 }], ['hi']]) },
          { input_ids: [1, 2], prompt: 'both' },
        ]),
        options: { max_new_tokens: 2 },
      },
    };
    case 'options': return {
      id, verb: 'generate', args: {
        input_ids: [1, 2, 3],
        options: pick([pick([-1, 'x', true, [1, 'a'], 2 ** 40]), { max_new_tokens: pick([-1, 0, 'many', 2.5]) }, { temperature: pick([-1, 'hot', null]), do_sample: true },
          { top_k: pick([-3, 'k', 1.5]), do_sample: true, max_new_tokens: 2 }, { top_p: pick([2, -0.5, 'p']), do_sample: true, max_new_tokens: 2 },
          { [`no_such_${Math.floor(rand() * 100)}`]: 1 }, { stop_token_ids: pick(['x', [null], ['a']]), max_new_tokens: 2 },
          { num_beams: pick([0, -2, 'b']), max_new_tokens: 2 }, { repetition_penalty: pick([0, -1, 'r']), max_new_tokens: 2 },
          { speculative: pick([{ method: 'magic' }, 'yes', { method: 'prompt_lookup', max_draft: 99 }]), max_new_tokens: 2 }]),
      },
    };
    case 'other-kind': return pick([
      { id, verb: 'speak', args: { text: pick(['hello', junk()]), controls: pick([junk(), { noise_scale: 'x' }]) } },
      { id, verb: 'transcribe', args: { samples: pick([junk(), new Float32Array(8)]), sample_rate: pick([junk(), 16000]) } },
      { id, verb: 'detect_speech', args: { samples: pick([junk(), new Float32Array(8)]), sample_rate: pick([junk(), 16000]) } },
      { id, verb: 'run', args: { inputs: pick([junk(), { x: { values: [1], shape: [2] } }]), options: junk() } },
    ]);
    default: return pick([
      { id, verb: 'storage_remove', args: { key: pick([junk(), 'no-such-key']) } },
      { id, verb: pick(['storage', 'storage_wipe']), args: { op: pick(['list', 'remove']) } },
    ]);
  }
}

test(`${CASES} bad requests to one worker: each an error naming what was wrong; the worker still generates`, { timeout: TIMEOUTS.file * (CASES / 300) }, async (t) => {
  if (!fx.have) return t.skip(`${NAME} not built: run make fixtures`);
  const badBundles = writeBadBundles(path.join(ROOT, 'build', 'e2e', `fuzz-${process.pid}`));
  await onFixturePage(fx, async (page, bundleUrl) => {
    const base = bundleUrl.slice(0, -`${NAME}/`.length);
    const rand = prng(SEED);
    const cases = Array.from({ length: CASES }, (_, i) => drawCase(rand, base, badBundles, 1_000_000 + i));
    const t0 = performance.now();
    const replies = await page.evaluate(async (cases) => {
      const client = window.__onnxpipe.client;
      const worker = client.runtime.worker;   // private: the test posts raw calls
      const out = [];
      for (const [i, message] of cases.entries()) {
        const id = 1_000_000 + i;
        const reply = await new Promise((resolve) => {
          const timer = setTimeout(() => done({ silence: true }), 5_000);
          const listen = (e) => {
            // the answer to this case: its id, or an error for a message with no usable id
            if (e.data?.event === 'fatal') done(e.data);
            else if ('event' in (e.data ?? {})) return;   // a call's events come before its last word
            else if (e.data?.id === id || (e.data?.error && e.data.id === -1)) done(e.data);
          };
          function done(data) {
            clearTimeout(timer);
            worker.removeEventListener('message', listen);
            resolve(data);
          }
          worker.addEventListener('message', listen);
          worker.postMessage(message);
        });
        const what = reply.error ? 'error' : reply.event === 'fatal' ? 'fatal' : reply.silence ? 'silence' : 'result';
        out.push({ type: what, kind: reply.error?.kind, message: reply.error?.message ?? reply.data?.reason });
      }
      return { out, same: client.runtime.worker === worker };
    }, cases);
    const ms = performance.now() - t0;
    const byKind = {};
    const wrong = [];
    for (const [i, r] of replies.out.entries()) {
      byKind[r.kind ?? r.type] = (byKind[r.kind ?? r.type] ?? 0) + 1;
      if (r.type !== 'error' || !KINDS.has(r.kind) || !r.message) wrong.push({ case: cases[i], reply: r });
    }
    console.log(`# ${CASES} cases (seed ${SEED}) in ${(ms / 1000).toFixed(1)} s: ${JSON.stringify(byKind)}`);
    assert.deepEqual(wrong.slice(0, 40).map((w) => JSON.stringify(w)), [], `${wrong.length} case(s) not answered by a typed error`);
    assert.ok(replies.same, 'the worker was replaced');
    // the same worker: the fixture's greedy tokens
    const n = 8;
    const tokens = await page.evaluate(async ({ ids, n }) => {
      const worker = window.__onnxpipe.client.runtime.worker;
      return await new Promise((resolve) => {
        worker.addEventListener('message', (e) => {
          if (e.data.id === 2_000_000 && ('result' in e.data || 'error' in e.data)) resolve(e.data.result?.tokens ?? e.data);
        });
        worker.postMessage({ id: 2_000_000, verb: 'generate', args: { input_ids: ids, options: { do_sample: false, max_new_tokens: n } } });
      });
    }, { ids: fx.expected.input_ids, n });
    assert.deepEqual(tokens, fx.expected.greedy_tokens.slice(0, n));
  });
});
