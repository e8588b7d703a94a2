// Tool calling in the browser (issue 27): a tiny random Qwen2 decoder with the real Qwen2.5 chat
// template (tests/fixtures/tool_templates.py) in the runtime worker and through the library
// engine. A forced call (tool_choice "required", and a named function) with a seed gives the
// native tool calls (names and arguments; ids are random), and the next turn — the assistant
// message with those calls plus a `tool` message per call — gives the native tokens. The native
// side runs at test time on the same bundle and file, and picks the seeds: the first whose forced
// call completes (random weights often run to "length"). An unknown tool_choice name is an input
// error naming tool_choice.function.name, and the worker answers the next call. Through the
// engine, the returned assistant message (refusal: null included) goes back into messages as it is.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, python, siteDir, startServer } from './lib/browser.mjs';
import { FIXTURE_CACHE, ensureManifest, generate, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BASE = 'tjs_qwen2';
const have = fs.existsSync(path.join(FIXTURE_CACHE, BASE, 'expected.json'));
const BUNDLES = path.join(ROOT, 'build', 'e2e', `tool-calls-${process.pid}`);
const NAME = 'qwen25-tools';
const LOAD = { ep: 'wasm', dtype: 'fp32' };   // the file native runs open too

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['c', 'f'] } }, required: ['city'] } } },
  { type: 'function', function: { name: 'add', description: 'Add two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'], additionalProperties: false } } },
];
const ASK = [{ role: 'user', content: 'What is 2 + 3?' }];
const CHOICES = { required: 'required', named: { type: 'function', function: { name: 'add' } } };
const SEEDS = [0, 1, 2, 3, 4, 5, 6, 7];
const FORCED = { do_sample: true, temperature: 1.0, max_new_tokens: 120 };   // + tools, tool_choice, random_seed
const NEXT = { do_sample: true, temperature: 1.0, random_seed: 0, max_new_tokens: 16 };   // + tools
const ANSWER = '5';

/** The next turn: the assistant message with ``calls`` and a tool message answering each. */
const nextTurn = (text, calls) => [...ASK, { role: 'assistant', content: text || null, tool_calls: calls },
  ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: ANSWER }))];
/** A call without its random id. */
const shape = (calls) => (calls ?? []).map(({ type, function: fn }) => ({ type, function: fn }));

/** Build the bundle under BUNDLES and run every case natively (onnxpipe's Python API). */
function native() {
  const script = `
import json, sys
from pathlib import Path
import onnxpipe
from tests.fixtures.tool_templates import QWEN25, tool_bundle
args = json.loads(sys.argv[2])
pipe = onnxpipe.load(str(tool_bundle(QWEN25, Path(sys.argv[1]))), dtype="fp32")
def run(messages, **options):
    r = pipe.chat(messages, tools=args["tools"], **options)
    return {"tokens": list(r.tokens), "text": r.text, "finish_reason": r.finish_reason, "tool_calls": r.tool_calls}
out = {}
for name, choice in args["choices"].items():
    for seed in args["seeds"]:
        first = run(args["ask"], tool_choice=choice, random_seed=seed, **args["forced"])
        if first["finish_reason"] == "tool_calls":
            break
    else:
        sys.exit(f"{name}: no forced call ended within max_new_tokens in seeds {args['seeds']}")
    calls = first["tool_calls"]
    turn = [*args["ask"], {"role": "assistant", "content": first["text"] or None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": c["id"], "content": args["answer"]} for c in calls)]
    out[name] = {"seed": seed, "first": first, "next": run(turn, **args["next"])}
print(json.dumps(out))
`;
  const args = { tools: TOOLS, ask: ASK, choices: CHOICES, seeds: SEEDS, forced: FORCED, next: NEXT, answer: ANSWER };
  return new Promise((resolve, reject) => {
    execFile(python(), ['-c', script, path.join(BUNDLES, NAME), JSON.stringify(args)], {
      cwd: ROOT, timeout: TIMEOUTS.native, maxBuffer: 1 << 24,
      env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) },
    }, (error, stdout, stderr) => (error ? reject(new Error(`native run failed: ${stderr || error.message}`)) : resolve(JSON.parse(stdout))));
  });
}

let server, run, want;
before(async () => {
  if (!have) return;
  fs.rmSync(BUNDLES, { recursive: true, force: true });
  fs.mkdirSync(BUNDLES, { recursive: true });
  [want, run] = await Promise.all([native(), launchBrowser()]);
  ensureManifest(path.join(BUNDLES, NAME));
  server = await startServer({ root: siteDir(), mounts: { '/fixtures/': BUNDLES } });
});
after(async () => {
  await run?.browser.close();
  await server?.stop();
  fs.rmSync(BUNDLES, { recursive: true, force: true });
});

test('runtime worker: forced calls and the next turn give the native calls and tokens; an unknown tool_choice name is a clear error', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`no ${BASE} fixture built: run make fixtures`);
  const page = await openRuntimePage(run.context, server.url);
  try {
    await loadBundle(page, `${server.url}fixtures/${NAME}/`, LOAD);
    for (const [name, choice] of Object.entries(CHOICES)) {
      const { seed, first: w1, next: w2 } = want[name];
      const first = (await generate(page, { messages: ASK, options: { ...FORCED, tools: TOOLS, tool_choice: choice, random_seed: seed } })).result;
      assert.equal(first.finish_reason, 'tool_calls', `${name}, seed ${seed}: ${first.text}`);
      assert.deepEqual(first.tokens, w1.tokens, `${name}: browser "${first.text}" vs native "${w1.text}"`);
      assert.deepEqual(shape(first.tool_calls), shape(w1.tool_calls), name);
      assert.ok(first.tool_calls.every((c) => /^call_[0-9a-f]+$/.test(c.id)), JSON.stringify(first.tool_calls));
      if (name === 'named') assert.ok(first.tool_calls.every((c) => c.function.name === 'add'));
      assert.equal(first.grammar?.kind, 'structural_tag', JSON.stringify(first.grammar));
      for (const c of first.tool_calls) JSON.parse(c.function.arguments);

      // the browser's own calls (their ids) and a tool message each: the native next reply
      const next = (await generate(page, { messages: nextTurn(first.text, first.tool_calls), options: { ...NEXT, tools: TOOLS } })).result;
      assert.deepEqual(next.tokens, w2.tokens, `${name} next turn: browser "${next.text}" vs native "${w2.text}"`);
      assert.equal(next.finish_reason, w2.finish_reason, name);
      assert.deepEqual(shape(next.tool_calls), shape(w2.tool_calls), name);
    }

    // a tool_choice naming no tool: an input error naming the field; the worker goes on
    const unknown = { type: 'function', function: { name: 'get_time' } };
    await assert.rejects(generate(page, { messages: ASK, options: { ...FORCED, tools: TOOLS, tool_choice: unknown } }),
      (error) => (error.kind === 'input' && /tool_choice\.function\.name/.test(error.message) && /get_time/.test(error.message))
        || assert.fail(`${error.kind}: ${error.message}`));
    const { seed, first: w1 } = want.named;
    const again = (await generate(page, { messages: ASK, options: { ...FORCED, tools: TOOLS, tool_choice: CHOICES.named, random_seed: seed } })).result;
    assert.deepEqual(again.tokens, w1.tokens, 'the call after an error');
    console.log(`# seeds ${want.required.seed}/${want.named.seed}: ${JSON.stringify(shape(want.required.first.tool_calls))}; ` +
      `next "${want.required.next.text}"`);
    assert.deepEqual(run.offsite, [], 'requests left 127.0.0.1');
  } catch (err) {
    console.error(run.logs.slice(-40).join('\n'));
    throw err;
  } finally {
    await page.close();
  }
});

test('library engine: chat.completions.create with tools gives OpenAI tool_calls, finish_reason "tool_calls", and the native next reply', { timeout: TIMEOUTS.file }, async (t) => {
  if (!have) return t.skip(`no ${BASE} fixture built: run make fixtures`);
  const page = await run.context.newPage();
  page.on('pageerror', (error) => run.logs.push(`pageerror: ${error.message}`));
  try {
    await page.goto(`${server.url}library.html`, { timeout: TIMEOUTS.page });
    await page.waitForFunction(() => Boolean(window.__onnxpipeLibrary), null, { timeout: TIMEOUTS.load });
    const { seed, first: w1, next: w2 } = want.required;
    const out = await page.evaluate(async ({ model, load, tools, ask, seed, answer, forced, next }) => {
      const { engine } = window.__onnxpipeLibrary;
      await engine.load(model, load);
      const first = await engine.chat.completions.create({ model, messages: ask, tools, tool_choice: 'required', seed,
        temperature: forced.temperature, max_tokens: forced.max_new_tokens });
      const message = first.choices[0].message;
      const chunks = [];
      for await (const c of await engine.chat.completions.create({ model, messages: ask, tools, tool_choice: 'required', seed,
        temperature: forced.temperature, max_tokens: forced.max_new_tokens, stream: true })) chunks.push(c);
      const turn = [...ask, message, ...message.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: answer }))];
      const second = await engine.chat.completions.create({ model, messages: turn, tools, seed: next.random_seed,
        temperature: next.temperature, max_tokens: next.max_new_tokens });
      let refused = null;   // a refusal other than null: onnxpipe's replies never carry one
      try {
        await engine.chat.completions.create({ model, messages: [...ask, { ...message, refusal: 'No.' }], max_tokens: 2 });
      } catch (e) {
        refused = { kind: e.kind, param: e.param };
      }
      return { first, chunks, second, refused };
    }, { model: `${server.url}fixtures/${NAME}/`, load: LOAD, tools: TOOLS, ask: ASK, seed, answer: ANSWER, forced: FORCED, next: NEXT });

    const choice = out.first.choices[0];
    assert.equal(out.first.object, 'chat.completion');
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.role, 'assistant');
    assert.equal(choice.message.content, w1.text || null);
    assert.deepEqual(shape(choice.message.tool_calls), shape(w1.tool_calls));
    assert.ok(choice.message.tool_calls.every((c) => /^call_[0-9a-f]+$/.test(c.id)), JSON.stringify(choice.message.tool_calls));
    assert.equal(out.first.usage.completion_tokens, w1.tokens.length);

    // streamed: the calls come as tool_calls deltas (index, id, function), then finish_reason
    const deltas = out.chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    assert.deepEqual(deltas.map(({ index, type, function: fn }) => ({ index, type, function: fn })),
      shape(w1.tool_calls).map((c, index) => ({ index, ...c })));
    assert.equal(out.chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'tool_calls');

    const reply = out.second.choices[0];
    assert.equal(reply.message.content ?? '', w2.text, 'the next reply is the native one');
    assert.equal(out.second.usage.completion_tokens, w2.tokens.length);
    assert.equal(reply.finish_reason, w2.tool_calls?.length ? 'tool_calls' : w2.finish_reason);
    assert.deepEqual(out.refused, { kind: 'input', param: 'messages[1].refusal' });
    assert.deepEqual(run.offsite, [], 'requests left 127.0.0.1');
  } catch (err) {
    console.error(run.logs.slice(-40).join('\n'));
    throw err;
  } finally {
    await page.close();
  }
});
