// The public engine API (web/src/engine/, issue 25) on /library.html in headless Chromium, with
// the real SmolLM2, Piper and Whisper bundles: streamed and whole chat completions in OpenAI's
// shapes, an AbortSignal that ends a stream and leaves the model usable, typed errors naming the
// field, several models loaded at once, and the official `openai` client (bundled into the page)
// against the same engine through engine.fetch, with no server: chat, speech and transcription.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLES = ['smollm2-135m-instruct', 'piper-en-us-joe', 'whisper-base'];
const missing = BUNDLES.filter((b) => !fs.existsSync(path.join(ROOT, 'public', 'models', b, 'manifest.json')));
const QUESTION = [{ role: 'user', content: 'What is the capital of France?' }];
let server, run, page;
let firstAnswer = null;   // the whole greedy answer of a freshly loaded model (test 1)

before(async () => {
  if (missing.length) return;
  server = await startServer({ root: siteDir() });
  run = await launchBrowser();
  page = await run.context.newPage();
  page.on('pageerror', (error) => run.logs.push(`pageerror: ${error.message}`));
  await page.goto(`${server.url}library.html`, { timeout: TIMEOUTS.page });
  await page.waitForFunction(() => Boolean(window.__onnxpipeLibrary), null, { timeout: TIMEOUTS.load });
});
after(async () => {
  await run?.browser.close();
  await server?.stop();
});

const model = (name) => `${server.url}models/${name}/`;

test('chat completions: streamed chunks and the whole answer in OpenAI\'s shapes', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/ lacks ${missing}: run make models`);
  const out = await page.evaluate(async ({ model, messages }) => {
    const { engine } = window.__onnxpipeLibrary;
    const chunks = [];
    const stream = await engine.chat.completions.create({ model, messages, stream: true, max_tokens: 64, temperature: 0, seed: 1,
      stop: ['\n\n'], stream_options: { include_usage: true } });
    for await (const chunk of stream) chunks.push(chunk);
    const whole = await engine.chat.completions.create({ model, messages, max_tokens: 64, temperature: 0 });
    return { chunks, whole, models: await engine.models.list() };
  }, { model: model('smollm2-135m-instruct'), messages: QUESTION });
  const { chunks, whole } = out;
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.match(text, /Paris/);
  assert.ok(chunks.every((c) => c.id === chunks[0].id && c.object === 'chat.completion.chunk' && c.model === model('smollm2-135m-instruct')));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const last = chunks.at(-2);
  assert.equal(last.choices[0].finish_reason, 'stop');
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.total_tokens, usage.usage.prompt_tokens + usage.usage.completion_tokens);
  assert.ok(usage.usage.prompt_tokens > 10 && usage.usage.completion_tokens > 3, JSON.stringify(usage.usage));
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.choices[0].message.content, text, 'greedy: the whole answer is the streamed one');
  assert.equal(whole.choices[0].finish_reason, 'stop');
  firstAnswer = whole.choices[0].message.content;
  assert.deepEqual(out.models.data.map((m) => [m.id, m.object, m.kind]), [[model('smollm2-135m-instruct'), 'model', 'text']]);
});

test('load reports progress per file; concurrent requests to one model queue, each answered', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ model, voice }) => {
    const { engine } = window.__onnxpipeLibrary;
    const progress = [];
    const info = await engine.load(voice, { onProgress: (p) => progress.push(p) });
    const ask = (content) => engine.chat.completions.create({ model, messages: [{ role: 'user', content }], max_tokens: 24, temperature: 0 });
    const order = [];
    const answers = await Promise.all(['What is 2 + 2?', 'Name a color.', 'Say hello.'].map((q, i) => ask(q).then((r) => {
      order.push(i);
      return r.choices[0].message.content;
    })));
    return { kind: info.kind, progress, answers, order };
  }, { model: model('smollm2-135m-instruct'), voice: model('piper-en-us-joe') });
  assert.equal(out.kind, 'speech');
  assert.ok(out.answers.every((a) => a.length > 0), JSON.stringify(out.answers));
  assert.deepEqual(out.order, [0, 1, 2], 'answered in the order asked');
  const files = out.progress.filter((p) => p.file !== 'runtime' && p.total > 0);
  assert.ok(files.some((p) => p.file.endsWith('.onnx') && p.loaded === p.total), JSON.stringify(out.progress.slice(-5)));
  assert.ok(out.progress.every((p) => typeof p.file === 'string' && p.loaded <= p.total && p.model.endsWith('/piper-en-us-joe/')));
});

test('an AbortSignal ends the stream with an AbortError; the model answers the next request as before', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ model, messages }) => {
    const { engine } = window.__onnxpipeLibrary;
    const request = { model, messages: [{ role: 'user', content: 'Tell me a long story about a dragon.' }], max_tokens: 200, temperature: 0 };
    const controller = new AbortController();
    let chunks = 0;
    let error = null;
    try {
      const stream = await engine.chat.completions.create({ ...request, stream: true }, { signal: controller.signal });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content && ++chunks === 3) controller.abort();
      }
    } catch (e) {
      error = { name: e.name, kind: e.kind };
    }
    const after = await engine.chat.completions.create({ model, messages, max_tokens: 64, temperature: 0 });
    return { chunks, error, after: after.choices[0].message.content };
  }, { model: model('smollm2-135m-instruct'), messages: QUESTION });
  assert.deepEqual(out.error, { name: 'AbortError', kind: 'aborted' });
  assert.equal(out.chunks, 3, 'no chunk after the abort, however many the worker had sent');
  assert.match(out.after, /Paris/);
  if (firstAnswer !== null) assert.equal(out.after, firstAnswer, 'the same answer as the freshly loaded model gave');
});

test('bad requests: typed errors that name the field; the engine stays usable', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const errors = await page.evaluate(async ({ model }) => {
    const { engine } = window.__onnxpipeLibrary;
    const messages = [{ role: 'user', content: 'Hi' }];
    const tryIt = async (params) => {
      try {
        await engine.chat.completions.create(params);
        return null;
      } catch (e) {
        return { name: e.name, kind: e.kind, param: e.param, message: e.message, isOnnxpipe: e instanceof Error && 'kind' in e };
      }
    };
    return {
      logprobs: await tryIt({ model, messages, logprobs: true }),
      role: await tryIt({ model, messages: [{ role: 'robot', content: 'Hi' }] }),
      temperature: await tryIt({ model, messages, temperature: 5 }),
      n: await tryIt({ model, messages, n: 2 }),
      unknownModel: await tryIt({ model: `${model}../no-such-model/`, messages }),
    };
  }, { model: model('smollm2-135m-instruct') });
  assert.deepEqual([errors.logprobs.kind, errors.logprobs.param], ['input', 'logprobs']);
  assert.match(errors.logprobs.message, /logprobs: not supported/);
  assert.deepEqual([errors.role.kind, errors.role.param], ['input', 'messages[0].role']);
  assert.deepEqual([errors.temperature.param, errors.n.param], ['temperature', 'n']);
  assert.deepEqual([errors.unknownModel.kind, errors.unknownModel.name], ['not_found', 'ModelNotFoundError']);
  assert.ok(Object.values(errors).every((e) => e.isOnnxpipe));
});

test('structured output and tools on chat completions: each bad field refused naming it; the engine stays usable', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ model }) => {
    const { engine } = window.__onnxpipeLibrary;
    const messages = [{ role: 'user', content: 'Hi' }];
    const weather = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
    const tryIt = async (params) => {
      try {
        await engine.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0, ...params });
        return null;
      } catch (e) {
        return { param: e.param, kind: e.kind, name: e.name, message: e.message };
      }
    };
    return {
      formatType: await tryIt({ response_format: { type: 'yaml' } }),
      formatKey: await tryIt({ response_format: { type: 'json_object', schema: {} } }),
      schemaName: await tryIt({ response_format: { type: 'json_schema', json_schema: { name: 'a b', schema: {} } } }),
      schema: await tryIt({ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: 'object' } } }),
      strict: await tryIt({ response_format: { type: 'json_schema', json_schema: { name: 'a', schema: {}, strict: 'yes' } } }),
      regex: await tryIt({ response_format: { type: 'regex', regex: '' } }),
      syntax: await tryIt({ response_format: { type: 'grammar', grammar: 'root ::= "a"', syntax: 'lark' } }),
      toolsEmpty: await tryIt({ tools: [] }),
      toolType: await tryIt({ tools: [{ ...weather, type: 'custom' }] }),
      toolName: await tryIt({ tools: [{ type: 'function', function: { name: 'get weather' } }] }),
      toolTwice: await tryIt({ tools: [weather, weather] }),
      toolParams: await tryIt({ tools: [{ type: 'function', function: { name: 'f', parameters: [] } }] }),
      choiceName: await tryIt({ tools: [weather], tool_choice: { type: 'function', function: { name: 'get_time' } } }),
      choiceWord: await tryIt({ tools: [weather], tool_choice: 'always' }),
      choiceAlone: await tryIt({ tool_choice: 'auto' }),
      orphanTool: await tryIt({ messages: [...messages, { role: 'tool', tool_call_id: 'call_9', content: '21 C' }] }),
      toolNoId: await tryIt({ messages: [...messages, { role: 'tool', content: '21 C' }] }),
      badArgs: await tryIt({ messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ ...call, function: { name: 'get_weather', arguments: '{city' } }] }] }),
      userCalls: await tryIt({ messages: [{ role: 'user', content: 'Hi', tool_calls: [call] }] }),
      nullContent: await tryIt({ messages: [{ role: 'assistant', content: null }] }),
      after: (await engine.chat.completions.create({ model, messages: [{ role: 'user', content: 'What is the capital of France?' }], max_tokens: 16, temperature: 0 })).choices[0].message.content,
    };
  }, { model: model('smollm2-135m-instruct') });
  const { after, ...errors } = out;
  assert.deepEqual(Object.fromEntries(Object.entries(errors).map(([k, e]) => [k, e?.param])), {
    formatType: 'response_format.type', formatKey: 'response_format.schema', schemaName: 'response_format.json_schema.name',
    schema: 'response_format.json_schema.schema', strict: 'response_format.json_schema.strict', regex: 'response_format.regex',
    syntax: 'response_format.syntax', toolsEmpty: 'tools', toolType: 'tools[0].type', toolName: 'tools[0].function.name',
    toolTwice: 'tools[1].function.name', toolParams: 'tools[0].function.parameters', choiceName: 'tool_choice', choiceWord: 'tool_choice',
    choiceAlone: 'tool_choice', orphanTool: 'messages[1].tool_call_id', toolNoId: 'messages[1].tool_call_id',
    badArgs: 'messages[1].tool_calls[0].function.arguments', userCalls: 'messages[0].tool_calls', nullContent: 'messages[0].content',
  });
  assert.ok(Object.values(errors).every((e) => e.kind === 'input' && e.name === 'InputError'), JSON.stringify(errors));
  assert.match(errors.choiceName.message, /no tool is named "get_time" \(tools: get_weather\)/);
  assert.match(errors.orphanTool.message, /call_9/);
  assert.match(after, /Paris/);
});

test('response_format json_schema through engine.chat.completions and the openai client: JSON the schema takes; a tool turn accepted', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const schema = { type: 'object', properties: { city: { type: 'string' }, country: { type: 'string' } }, required: ['city', 'country'] };
  const out = await page.evaluate(async ({ model, schema }) => {
    const { engine, openai } = window.__onnxpipeLibrary;
    const messages = [{ role: 'user', content: 'What is the capital of France? Answer as JSON.' }];
    const response_format = { type: 'json_schema', json_schema: { name: 'capital', schema, strict: true } };
    const whole = await engine.chat.completions.create({ model, messages, response_format, max_tokens: 48, temperature: 0 });
    const chunks = [];
    for await (const c of await engine.chat.completions.create({ model, messages, response_format, max_tokens: 48, temperature: 0, stream: true })) chunks.push(c);
    const client = await openai.chat.completions.create({ model, messages, response_format, max_tokens: 48, temperature: 0 });
    const json = await engine.chat.completions.create({ model, messages, response_format: { type: 'json_object' }, max_tokens: 48, temperature: 0 });
    // a conversation with a call and its answer reaches the model (no tools asked this turn)
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
    const turn = await engine.chat.completions.create({ model, max_tokens: 16, temperature: 0, messages: [
      { role: 'user', content: 'What is the weather in Paris?' }, { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 21}' }] });
    return { whole, chunks, client, json, turn };
  }, { model: model('smollm2-135m-instruct'), schema });
  const streamed = out.chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  for (const reply of [out.whole, out.client]) {
    assert.equal(reply.choices[0].finish_reason, 'stop', JSON.stringify(reply.choices[0]));
    const value = JSON.parse(reply.choices[0].message.content);
    assert.deepEqual(Object.keys(value).sort(), ['city', 'country'], reply.choices[0].message.content);
    assert.ok(typeof value.city === 'string' && typeof value.country === 'string');
    assert.equal(reply.choices[0].message.tool_calls, undefined);
  }
  assert.equal(out.client.choices[0].message.content, out.whole.choices[0].message.content, 'greedy: the client gets the same reply');
  assert.equal(streamed, out.whole.choices[0].message.content, 'greedy: streamed and whole agree');
  const stats = out.chunks.find((c) => c.choices[0]?.finish_reason).onnxpipe;
  assert.equal(stats.grammar?.kind, 'json_schema', JSON.stringify(stats));
  assert.equal(stats.grammar.complete, true);
  assert.equal(out.whole.onnxpipe.grammar.kind, 'json_schema');
  const object = JSON.parse(out.json.choices[0].message.content);
  assert.ok(typeof object === 'object' && object !== null && !Array.isArray(object), out.json.choices[0].message.content);
  assert.equal(out.json.onnxpipe.grammar.kind, 'json_object');
  assert.ok(out.turn.choices[0].message.content.length > 0 && out.turn.usage.prompt_tokens > 20, JSON.stringify(out.turn.usage));
});

test('the official openai client through engine.fetch: chat, speech and transcription with three models loaded', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ chat, voice, asr, messages }) => {
    const { engine, openai } = window.__onnxpipeLibrary;
    let text = '';
    const stream = await openai.chat.completions.create({ model: chat, messages, stream: true, max_tokens: 32, temperature: 0 });
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    const speech = await openai.audio.speech.create({ model: voice, voice: 'default', input: 'Hello there, how are you today?', response_format: 'wav' });
    const wav = new Uint8Array(await speech.arrayBuffer());
    const file = new File([wav], 'hello.wav', { type: 'audio/wav' });
    const heard = await openai.audio.transcriptions.create({ model: asr, file });
    let refused = null;
    try {
      await openai.chat.completions.create({ model: chat, messages, logprobs: true });
    } catch (e) {
      refused = { status: e.status, param: e.param, code: e.code };
    }
    const direct = await (await engine.audio.speech.create({ model: voice, input: 'Hi.' })).arrayBuffer();
    return { text, riff: String.fromCharCode(...wav.slice(0, 4)), bytes: wav.length, heard: heard.text, refused,
      directBytes: direct.byteLength, models: (await engine.models.list()).data.map((m) => m.kind).sort() };
  }, { chat: model('smollm2-135m-instruct'), voice: model('piper-en-us-joe'), asr: model('whisper-base'), messages: QUESTION });
  assert.match(out.text, /Paris/);
  assert.equal(out.riff, 'RIFF');
  assert.ok(out.bytes > 20_000 && out.directBytes > 5_000, JSON.stringify(out));
  assert.match(out.heard.toLowerCase(), /hello there/);
  assert.deepEqual(out.refused, { status: 400, param: 'logprobs', code: 'input' });
  assert.deepEqual(out.models, ['speech', 'text', 'transcription']);
  assert.deepEqual(run.offsite, [], 'requests left 127.0.0.1');
  assert.ok(!run.logs.some((l) => l.startsWith('pageerror')), run.logs.join('\n'));
});

test('onnxpipe extras on chat completions: token ids and speed on the last chunk, cached prompt tokens in usage, drafts', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ model, messages }) => {
    const { engine } = window.__onnxpipeLibrary;
    const read = async (params) => {
      const chunks = [];
      for await (const chunk of await engine.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, ...params })) chunks.push(chunk);
      return chunks;
    };
    const first = await read({ messages, max_tokens: 24, temperature: 0 });
    const answer = first.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    const turn2 = [...messages, { role: 'assistant', content: answer }, { role: 'user', content: 'And of Germany?' }];
    const second = await read({ messages: turn2, max_tokens: 16, temperature: 0 });
    const whole = await engine.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
    const drafted = await read({ messages, max_tokens: 24, temperature: 0, speculative: { method: 'prompt_lookup', max_draft: 4, ngram: 3 } });
    // engine.fetch's server-sent events carry the same extras
    const sse = await (await engine.fetch('http://onnxpipe.local/v1/chat/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages, max_tokens: 24, temperature: 0, stream: true }),
    })).text();
    return { first, second, whole, drafted, sse };
  }, { model: model('smollm2-135m-instruct'), messages: QUESTION });
  const content = (chunks) => chunks.filter((c) => c.choices[0]?.delta?.content);
  const last = (chunks) => chunks.find((c) => c.choices[0]?.finish_reason);
  for (const chunks of [out.first, out.second, out.drafted]) {
    for (const c of content(chunks)) assert.ok(Array.isArray(c.onnxpipe?.token_ids) && c.onnxpipe.token_ids.length >= 1, JSON.stringify(c));
    const stats = last(chunks).onnxpipe;
    assert.ok(stats.prefill_ms > 0 && stats.decode_tokens_per_s > 0, JSON.stringify(stats));
    const usage = chunks.at(-1).usage;
    assert.equal(stats.token_ids.length, usage.completion_tokens);
    assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
    // the streamed pieces' token ids are the completion's, in order
    assert.deepEqual(content(chunks).flatMap((c) => c.onnxpipe.token_ids), stats.token_ids.slice(0, content(chunks).flatMap((c) => c.onnxpipe.token_ids).length));
  }
  assert.deepEqual(out.whole.onnxpipe.token_ids, last(out.first).onnxpipe.token_ids, 'greedy: whole and streamed ids agree');
  // whole continued from the second turn's state cut back to the first prompt (a KV rewind, in
  // JavaScript on wasm: workers/bridge.ts sliceSeq), and still answered as the first did
  assert.ok(out.whole.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(out.whole.usage));
  assert.equal(out.whole.usage.completion_tokens, out.whole.onnxpipe.token_ids.length);
  const turn2 = out.second.at(-1).usage;
  assert.ok(turn2.prompt_tokens_details.cached_tokens > 0 && turn2.prompt_tokens_details.cached_tokens < turn2.prompt_tokens,
    `the second turn reused the first's prompt: ${JSON.stringify(turn2)}`);
  const drafts = last(out.drafted).onnxpipe.speculative;
  assert.ok(drafts && drafts.drafted >= drafts.accepted && drafts.accepted >= 0, JSON.stringify(last(out.drafted).onnxpipe));
  assert.equal(last(out.first).onnxpipe.speculative, undefined, 'no drafts asked, none reported');
  const events = out.sse.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)));
  assert.deepEqual(events.find((e) => e.choices[0]?.finish_reason)?.onnxpipe?.token_ids, out.whole.onnxpipe.token_ids);
});

test('engine.storage: the stored bundles, onChange after a load and a removal, a bad key refused', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ voice }) => {
    const { engine } = window.__onnxpipeLibrary;
    let changes = 0;
    const stop = engine.storage.onChange(() => { changes++; });
    await engine.unload(voice).catch(() => {});
    await engine.load(voice);
    const afterLoad = changes;
    const before = await engine.storage.list();
    let refused = null;
    try {
      await engine.storage.remove('');
    } catch (e) {
      refused = { name: e.name, kind: e.kind, param: e.param };
    }
    const key = before.find((b) => b.url === voice || voice.endsWith(`/${b.name}/`))?.key;
    const left = key ? await engine.storage.remove(key) : null;
    stop();
    return { before, left, afterLoad, afterRemove: changes, key, refused };
  }, { voice: model('piper-en-us-joe') });
  assert.ok(out.key, `the loaded voice is stored: ${JSON.stringify(out.before)}`);
  assert.ok(out.before.every((b) => b.bytes >= 0 && typeof b.key === 'string' && typeof b.url === 'string'), JSON.stringify(out.before));
  assert.ok(out.before.find((b) => b.key === out.key).bytes > 1e6, 'the voice\'s files are counted');
  assert.ok(out.afterLoad >= 1, 'onChange ran after the load');
  assert.equal(out.afterRemove, out.afterLoad + 1, 'onChange ran after the removal');
  assert.ok(!out.left.some((b) => b.key === out.key), 'removed');
  assert.equal(out.left.length, out.before.length - 1);
  assert.deepEqual(out.refused, { name: 'InputError', kind: 'input', param: 'key' });
});

test('streamed speech (stream_format "sse"): a speech.audio.delta per sentence with its samples, then speech.audio.done', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ voice }) => {
    const { engine } = window.__onnxpipeLibrary;
    const events = [];
    for await (const event of await engine.audio.speech.create({ model: voice, input: 'Hello there. How are you today?', stream_format: 'sse' })) {
      if (event.type === 'speech.audio.delta') {
        const pcm = atob(event.audio);
        events.push({ type: event.type, pcmBytes: pcm.length, firstPcm: (pcm.charCodeAt(0) | (pcm.charCodeAt(1) << 8)) << 16 >> 16,
          samples: event.onnxpipe.samples.length, first: event.onnxpipe.samples[0], rate: event.onnxpipe.sample_rate,
          index: event.onnxpipe.index, sentence: event.onnxpipe.sentence });
      } else {
        events.push({ type: event.type, usage: event.usage, result: event.onnxpipe.result,
          riff: String.fromCharCode(...event.onnxpipe.wav.slice(0, 4)), wavBytes: event.onnxpipe.wav.length });
      }
    }
    const refusals = [];
    for (const params of [{ response_format: 'wav', stream_format: 'sse' }, { stream_format: 'chunks' }]) {
      try {
        await engine.audio.speech.create({ model: voice, input: 'Hi.', ...params });
        refusals.push(null);
      } catch (e) {
        refusals.push({ name: e.name, param: e.param });
      }
    }
    const sse = await (await engine.fetch('http://onnxpipe.local/v1/audio/speech', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: voice, input: 'Hello there. How are you today?', stream_format: 'sse' }),
    })).text();
    return { events, refusals, sse };
  }, { voice: model('piper-en-us-joe') });
  const deltas = out.events.filter((e) => e.type === 'speech.audio.delta');
  const done = out.events.at(-1);
  assert.equal(done.type, 'speech.audio.done');
  assert.equal(deltas.length, 2, 'one delta a sentence');
  assert.deepEqual(deltas.map((d) => d.index), [0, 1]);
  assert.deepEqual(deltas.map((d) => d.sentence.text.trim()), done.result.sentences.map((s) => s.text.trim()));
  for (const d of deltas) {
    assert.equal(d.pcmBytes, d.samples * 2, 'audio: 16-bit PCM of the samples');
    assert.ok(Math.abs(d.firstPcm / 32767 - d.first) < 1e-3, `${d.firstPcm} vs ${d.first}`);
    assert.equal(d.rate, done.result.sample_rate);
  }
  const sent = deltas.reduce((n, d) => n + d.samples, 0);
  console.log(`# streamed speech: ${sent} samples in deltas, result.samples ${done.result.samples}, wav ${done.wavBytes} bytes`);
  // the deltas carry each sentence with its silence after it (the last one's trailing silence too)
  assert.ok(sent >= done.result.samples && sent - done.result.samples < 0.5 * done.result.sample_rate, `${sent} vs ${done.result.samples}`);
  assert.equal(done.riff, 'RIFF');
  // the WAV holds the speech, up to the last sentence's trailing silence
  assert.ok(done.wavBytes >= 44 + done.result.samples * 2 && done.wavBytes <= 44 + sent * 2, `${done.wavBytes} bytes`);
  assert.ok(done.usage.input_tokens > 0 && done.usage.total_tokens === done.usage.input_tokens + done.usage.output_tokens, JSON.stringify(done.usage));
  assert.deepEqual(out.refusals, [{ name: 'InputError', param: 'response_format' }, { name: 'InputError', param: 'stream_format' }]);
  const events = out.sse.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => JSON.parse(e.slice(6)));
  assert.deepEqual(events.map((e) => e.type), ['speech.audio.delta', 'speech.audio.delta', 'speech.audio.done']);
  // (a second speech: Piper's sampling makes other lengths)
  const pcm = events.slice(0, 2).reduce((n, e) => n + atob(e.audio).length / 2, 0);
  const { result } = events[2].onnxpipe;
  assert.ok(pcm >= result.samples && pcm - result.samples < 0.5 * result.sample_rate, `${pcm} PCM samples vs ${result.samples}`);
  assert.equal(events[0].onnxpipe.samples, undefined, 'no float samples in the JSON events');
  assert.equal(events[2].onnxpipe.wav, undefined, 'no WAV in the JSON events');
});

test('streamed transcription (stream: true): transcript.text.delta per window, then transcript.text.done with the figures', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip('models missing');
  const out = await page.evaluate(async ({ voice, asr }) => {
    const { engine } = window.__onnxpipeLibrary;
    const wav = await (await engine.audio.speech.create({ model: voice, input: 'Hello there, how are you today?' })).arrayBuffer();
    const file = new File([wav], 'hello.wav', { type: 'audio/wav' });
    const events = [];
    for await (const event of await engine.audio.transcriptions.create({ model: asr, file, stream: true })) events.push(event);
    const whole = await engine.audio.transcriptions.create({ model: asr, file });
    let refused = null;
    try {
      await engine.audio.transcriptions.create({ model: asr, file, stream: 'yes' });
    } catch (e) {
      refused = { name: e.name, param: e.param };
    }
    const form = new FormData();
    form.append('model', asr);
    form.append('file', file);
    form.append('stream', 'true');
    const sse = await (await engine.fetch('http://onnxpipe.local/v1/audio/transcriptions', { method: 'POST', body: form })).text();
    return { events, whole, refused, sse };
  }, { voice: model('piper-en-us-joe'), asr: model('whisper-base') });
  const deltas = out.events.filter((e) => e.type === 'transcript.text.delta');
  const done = out.events.at(-1);
  assert.equal(done.type, 'transcript.text.done');
  assert.ok(deltas.length >= 1, JSON.stringify(out.events));
  assert.equal(deltas.map((d) => d.delta).join('').trim(), done.text, 'the deltas add up to the text');
  assert.equal(done.text, out.whole.text, 'streamed and whole agree');
  assert.match(done.text.toLowerCase(), /hello there/);
  assert.deepEqual(deltas.map((d) => d.onnxpipe.window.index), deltas.map((_, i) => i));
  assert.ok(done.onnxpipe.audio_seconds > 1 && done.onnxpipe.compute_seconds > 0, JSON.stringify(done.onnxpipe));
  assert.ok(done.onnxpipe.tokens.length > 3 && done.onnxpipe.windows.length === deltas.length, JSON.stringify(done.onnxpipe));
  assert.deepEqual(out.refused, { name: 'InputError', param: 'stream' });
  const events = out.sse.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => JSON.parse(e.slice(6)));
  assert.equal(events.at(-1).type, 'transcript.text.done');
  assert.equal(events.at(-1).text, done.text);
});

test('engine.audio.listen: voice activity on a port as Realtime speech_started / speech_stopped events (with pause_ms, a pause first), clip, close', { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length || !fs.existsSync(path.join(ROOT, 'public', 'models', 'silero-vad', 'manifest.json'))) return t.skip('models missing');
  const out = await page.evaluate(async ({ voice, vad, timeout }) => {
    const { engine } = window.__onnxpipeLibrary;
    const wav = await (await engine.audio.speech.create({ model: voice, input: 'Hello there, how are you today?' })).arrayBuffer();
    const decoded = await new OfflineAudioContext(1, 1, 16000).decodeAudioData(wav);
    const audio = new Float32Array(16000 + decoded.length + 16000);   // a second of silence either side
    audio.set(decoded.getChannelData(0), 16000);
    let refused = null;
    try {
      await engine.audio.listen({ model: vad, port: new MessageChannel().port2, threshold: 0.5 });
    } catch (e) {
      refused = { name: e.name, param: e.param };
    }
    let refusedPause = null;
    try {
      await engine.audio.listen({ model: vad, port: new MessageChannel().port2, pause_ms: '300' });
    } catch (e) {
      refusedPause = { name: e.name, param: e.param };
    }
    const channel = new MessageChannel();
    const listening = await engine.audio.listen({ model: vad, port: channel.port2, controls: { min_silence_ms: 500 }, pause_ms: 300 });
    const events = [];
    const reading = (async () => {
      for await (const e of listening) {
        events.push({ type: e.type, start: e.audio_start_ms, end: e.audio_end_ms ?? null, samples: e.onnxpipe.samples?.length ?? null });
        if (e.type === 'input_audio_buffer.speech_stopped') return;
      }
    })();
    for (let at = 0; at < audio.length; at += 512) channel.port1.postMessage({ type: 'chunk', samples: audio.slice(at, at + 512), at });
    await Promise.race([reading, new Promise((r) => setTimeout(r, timeout))]);
    const clip = await listening.clip(16000);
    await listening.close();
    return { events, refused, refusedPause, rate: listening.sample_rate, clip: { position: clip.position, samples: clip.samples?.length ?? null }, total: audio.length };
  }, { voice: model('piper-en-us-joe'), vad: model('silero-vad'), timeout: TIMEOUTS.generate });
  assert.deepEqual(out.refused, { name: 'InputError', param: 'threshold' });
  assert.deepEqual(out.refusedPause, { name: 'InputError', param: 'pause_ms' });
  assert.equal(out.rate, 16000);
  const pauses = out.events.filter((e) => e.type === 'onnxpipe.speech_paused');
  const others = out.events.filter((e) => e.type !== 'onnxpipe.speech_paused');
  assert.deepEqual(others.map((e) => e.type), ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped'], JSON.stringify(out.events));
  const [started, stopped] = others;
  // the last pause (after 300 ms of silence) came before the stop, with its bounds and samples
  assert.equal(out.events.at(-2).type, 'onnxpipe.speech_paused', JSON.stringify(out.events));
  assert.deepEqual(pauses.at(-1), { ...stopped, type: 'onnxpipe.speech_paused' });
  assert.ok(started.start > 700 && started.start < 1300, `speech began near 1 s: ${started.start} ms`);
  assert.equal(stopped.start, started.start);
  assert.ok(stopped.end > stopped.start + 1000, JSON.stringify(stopped));
  assert.ok(Math.abs(stopped.samples - (stopped.end - stopped.start) * 16) <= 16, `the utterance's samples: ${stopped.samples}`);
  assert.ok(out.clip.position > 16000 && out.clip.samples === out.clip.position - 16000, JSON.stringify(out.clip));
});
