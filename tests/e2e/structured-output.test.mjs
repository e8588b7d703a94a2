// Constrained output in the browser: the worker's grammar engine (@mlc-ai/web-xgrammar,
// workers/grammar.ts) gives the masks the native one (PyPI xgrammar) gives, so a JSON-schema
// chat on SmolLM2 (greedy, and sampled with a seed and a repetition penalty) and a regex
// constraint yield exactly the native tokens, computed at test time; the text is JSON with the
// schema's keys; a schema the engine can't compile is an error naming
// response_format.json_schema.schema and the worker answers the next call; the vocabulary is
// kept next to the bundle in storage, and a second load takes it from there.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'smollm2-135m-instruct';
const BUNDLE_DIR = path.join(ROOT, 'public', 'models', BUNDLE);
const missing = ['model.wasm.onnx', 'manifest.json', 'pipeline.json'].filter((f) => !fs.existsSync(path.join(BUNDLE_DIR, f)));

const SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, city: { type: 'string' } },
  required: ['name', 'age', 'city'],
};
const PERSON = [{ role: 'user', content: 'Describe a person as JSON with name, age and city.' }];
const json = (strict) => ({ type: 'json_schema', json_schema: { name: 'person', schema: SCHEMA, strict } });
// each case: a chat request the browser and native onnxpipe both run
const CASES = {
  greedy: { messages: PERSON, options: { response_format: json(true), do_sample: false, max_new_tokens: 40 } },
  sampled: {
    messages: PERSON,
    options: { response_format: json(false), do_sample: true, temperature: 0.8, top_k: 40, random_seed: 7, repetition_penalty: 1.1, max_new_tokens: 40 },
  },
  regex: {
    messages: [{ role: 'user', content: 'What is the date today?' }],
    options: { response_format: { type: 'regex', regex: '20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]' }, do_sample: false, max_new_tokens: 16 },
  },
};

/** The native tokens of each case (python -m onnxpipe's API on the same bundle and variant). */
function nativeRuns() {
  const script = `
import json, sys
import onnxpipe
cases = json.loads(sys.argv[1])
pipe = onnxpipe.load(sys.argv[2], variant="wasm")
out = {}
for name, case in cases.items():
    r = pipe.chat(case["messages"], **case["options"])
    out[name] = {"tokens": list(r.tokens), "text": r.text, "finish_reason": r.finish_reason}
print(json.dumps(out))
`;
  return new Promise((resolve, reject) => {
    execFile(python(), ['-c', script, JSON.stringify(CASES), BUNDLE_DIR],
      { cwd: ROOT, env: { ...process.env, PYTHONPATH: path.join(ROOT, 'py') }, timeout: TIMEOUTS.native, maxBuffer: 1 << 24 },
      (error, stdout, stderr) => (error ? reject(new Error(`native run failed: ${stderr || error.message}`)) : resolve(JSON.parse(stdout))));
  });
}

let server, browser, context, offsite, logs;
before(async () => {
  if (missing.length) return;
  server = await startServer({ root: siteDir() });
  ({ browser, context, offsite, logs } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('browser constrained decoding gives the native tokens; bad schemas are clear errors', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models`);
  const native = nativeRuns();   // alongside the browser
  native.catch(() => undefined);
  const page = await openRuntimePage(context, server.url);
  try {
    const url = `${server.url}models/${BUNDLE}/`;
    await loadBundle(page, url, { ep: 'wasm', variant: 'wasm' });
    const got = {};
    for (const [name, request] of Object.entries(CASES)) got[name] = (await generate(page, request)).result;
    const want = await native;

    for (const name of Object.keys(CASES)) {
      assert.deepEqual(got[name].tokens, want[name].tokens, `${name}: browser "${got[name].text}" vs native "${want[name].text}"`);
      assert.equal(got[name].finish_reason, want[name].finish_reason, name);
    }
    for (const name of ['greedy', 'sampled']) {
      const { text, grammar, finish_reason: finish } = got[name];
      assert.equal(grammar.kind, 'json_schema');
      assert.equal(finish, 'stop', `${name}: the grammar ended within max_new_tokens: ${text}`);
      assert.equal(grammar.complete, true, `${name}: ${text}`);
      const value = JSON.parse(text);
      for (const key of SCHEMA.required) assert.ok(key in value, `${name}: "${key}" missing from ${text}`);
      assert.equal(typeof value.name, 'string');
      assert.ok(Number.isInteger(value.age), text);
    }
    assert.equal(got.greedy.grammar.cached, false);
    assert.ok(got.greedy.grammar.vocabulary_ms > 0 && got.greedy.grammar.compile_ms > 0, JSON.stringify(got.greedy.grammar));
    assert.equal(got.sampled.grammar.vocabulary_ms, 0, 'the vocabulary goes to the engine once per bundle');
    assert.match(got.regex.text, /^20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]$/);

    // a schema the engine can't compile: an input error naming the field; the worker goes on
    const bad = { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'object', properties: 5 } } };
    await assert.rejects(generate(page, { messages: PERSON, options: { response_format: bad, max_new_tokens: 8 } }),
      (error) => /response_format\.json_schema\.schema/.test(error.message) || assert.fail(error.message));
    const next = (await generate(page, CASES.greedy)).result;
    assert.deepEqual(next.tokens, want.greedy.tokens, 'the call after an error');
    assert.equal(next.grammar.cached, true);

    // the vocabulary was kept next to the bundle; a second load reads it from there
    const stored = await page.evaluate(async (key) => {
      const dir = await (await (await navigator.storage.getDirectory()).getDirectoryHandle('onnxpipe-bundles'))
        .getDirectoryHandle(key);
      const derived = await dir.getDirectoryHandle('derived');
      const names = [];
      for await (const [name] of derived.entries()) names.push(name);
      return names;
    }, encodeURIComponent(url));
    assert.equal(stored.filter((n) => n.startsWith('grammar-vocabulary-')).length, 1, JSON.stringify(stored));
    await loadBundle(page, url, { ep: 'wasm', variant: 'wasm' });
    const again = (await generate(page, CASES.greedy)).result;
    assert.deepEqual(again.tokens, want.greedy.tokens, 'after a reload, from the stored vocabulary');
    console.log(`# greedy "${got.greedy.text}"; sampled "${got.sampled.text}"; regex "${got.regex.text}"; ` +
      `vocabulary ${got.greedy.grammar.vocabulary_ms} ms (${again.grammar.vocabulary_ms} ms stored), compile ${got.greedy.grammar.compile_ms} ms`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } catch (err) {
    console.error(logs.slice(-40).join('\n'));
    throw err;
  } finally {
    await page.close();
  }
});
