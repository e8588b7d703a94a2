// The chat page's structured output (issue 27): the "JSON schema" box sends response_format
// json_schema and the greedy reply of smollm2-135m-instruct is JSON with the schema's required
// keys; text in the box that is no JSON object shows an inline error and sends nothing; a reply
// with tool calls shows each as a block (the function's name, the arguments pretty-printed),
// rendered through the page's own message list (a real tool call from a model is the
// end-to-end tool round trip's, not this file's).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { loadOnChatPage } from './lib/chat-page.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = 'smollm2-135m-instruct';
const missing = ['model.onnx', 'manifest.json', 'pipeline.json'].filter((f) => !fs.existsSync(path.join(ROOT, 'public', 'models', BUNDLE, f)));
const SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' } },
  required: ['name', 'age'],
};

let server, browser, context, offsite, logs;
before(async () => {
  server = await startServer({ root: siteDir() });
  ({ browser, context, offsite, logs } = await launchBrowser());
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('chat page: a reply with tool calls shows each call as a block, its arguments pretty-printed', { timeout: TIMEOUTS.file }, async () => {
  const page = await context.newPage();
  try {
    await page.goto(server.url);
    await page.waitForFunction(() => window.__onnxpipe?.messages, null, { timeout: TIMEOUTS.page });
    const result = {
      text: '', finish_reason: 'tool_calls',
      tool_calls: [
        { id: 'call_1a2b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } },
        { id: 'call_3c4d', type: 'function', function: { name: 'get_time', arguments: '{"zone":"Europe/Paris"}' } },
      ],
    };
    const shown = await page.evaluate((result) => {
      const bubble = window.__onnxpipe.messages.add('assistant', '', true);
      bubble.finish(result.text, undefined, result.tool_calls);
      const root = bubble.root;
      return {
        body: root.querySelector('.msg-body').textContent,
        empty: root.classList.contains('empty'),
        blocks: [...root.querySelectorAll('[data-testid=tool-call]')].map((b) => ({
          id: b.dataset.id, name: b.querySelector('[data-testid=tool-call-name]').textContent,
          args: b.querySelector('[data-testid=tool-call-args]').textContent, tag: b.querySelector('[data-testid=tool-call-args]').localName,
        })),
      };
    }, result);
    assert.equal(shown.body, '', 'no raw call text in the message body');
    assert.equal(shown.empty, true);
    assert.deepEqual(shown.blocks.map((b) => [b.id, b.name, b.tag]), [['call_1a2b', 'get_weather', 'pre'], ['call_3c4d', 'get_time', 'pre']]);
    assert.equal(shown.blocks[0].args, JSON.stringify({ city: 'Paris', unit: 'celsius' }, null, 2));
    assert.equal(shown.blocks[1].args, '{\n  "zone": "Europe/Paris"\n}');
    assert.ok(await page.getByTestId('tool-call').first().isVisible());
  } finally {
    await page.close();
  }
});

test(`chat page: the JSON schema box refuses bad JSON inline, then constrains ${BUNDLE}'s greedy reply`, { timeout: TIMEOUTS.file }, async (t) => {
  if (missing.length) return t.skip(`public/models/${BUNDLE}/ lacks ${missing.join(', ')}: run make models`);
  const page = await context.newPage();
  try {
    await loadOnChatPage(page, server.url, BUNDLE, 'wasm');
    await page.getByTestId('max-new-tokens').fill('64');
    const schemaBox = page.getByTestId('schema');
    await schemaBox.locator('summary').click();

    // not JSON: an inline error, no request, the prompt kept
    await page.getByTestId('json-schema').fill('{"type": "object", "properties": ');
    await page.getByTestId('prompt').fill('Describe a person.');
    await page.getByTestId('prompt').press('Enter');
    const error = page.getByTestId('json-schema-error');
    await error.waitFor({ state: 'visible', timeout: TIMEOUTS.page });
    assert.match(await error.textContent(), /^Not JSON: /);
    assert.equal(await page.getByTestId('json-schema').getAttribute('aria-invalid'), '');
    let state = await page.evaluate(() => ({ status: window.__onnxpipe.state.status, messages: window.__onnxpipe.state.messages.length }));
    assert.deepEqual(state, { status: 'ready', messages: 0 }, 'nothing was sent');
    assert.equal(await page.getByTestId('prompt').inputValue(), 'Describe a person.');
    assert.equal(await page.locator('[data-testid=message]').count(), 0);

    // JSON that is no schema object: refused the same way; editing the box clears the error
    await page.getByTestId('json-schema').fill('[1, 2]');
    await page.getByTestId('prompt').press('Enter');
    assert.match(await error.textContent(), /Expected a JSON Schema object/);
    await page.getByTestId('json-schema').fill(JSON.stringify(SCHEMA, null, 2));
    assert.equal(await error.isVisible(), false, 'the error goes once the box is edited');

    // a schema: the greedy reply is JSON with its required keys
    await page.getByTestId('prompt').press('Enter');
    await page.waitForFunction(() => window.__onnxpipe.state.status === 'generating' || window.__onnxpipe.state.lastResult || window.__onnxpipe.state.lastError,
      null, { timeout: TIMEOUTS.page });
    await page.waitForFunction(() => window.__onnxpipe.state.status === 'ready', null, { timeout: TIMEOUTS.generate, polling: 100 });
    state = await page.evaluate(() => ({ result: window.__onnxpipe.state.lastResult, error: window.__onnxpipe.state.lastError }));
    assert.equal(state.error, null, `generation failed: ${JSON.stringify(state.error)}`);
    const { result } = state;
    assert.equal(result.finish_reason, 'stop', `the grammar ended within 64 tokens: ${JSON.stringify(result)}`);
    const reply = JSON.parse(result.text);
    for (const key of SCHEMA.required) assert.ok(key in reply, `${key} missing from ${result.text}`);
    assert.equal(typeof reply.name, 'string');
    assert.ok(Number.isInteger(reply.age), result.text);
    assert.deepEqual(Object.keys(reply).sort(), ['age', 'name'], 'strict: no other keys');
    assert.equal(result.grammar?.kind, 'json_schema', JSON.stringify(result.grammar));
    assert.equal(result.grammar.complete, true);
    const bubble = page.locator('[data-testid=message][data-role=assistant]').last();
    assert.equal(await bubble.locator('.msg-body').textContent(), result.text);
    console.log(`# chat schema: ${result.text} (${result.tokens.length} tokens; compile ${result.grammar.compile_ms} ms)`);
    assert.deepEqual(offsite, [], 'requests left 127.0.0.1');
  } catch (e) {
    console.error(logs.slice(-40).join('\n'));
    throw e;
  } finally {
    await page.close();
  }
});
