// The embeddable widget (docs/widget.md): <onnxpipe-chat>/<onnxpipe-speak> on a host page of a
// second origin, their frame on onnxpipe's origin; origin checks, frame-ancestors, CSS
// isolation, threads, and how storage partitioning affects model downloads.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, test } from 'node:test';
import { ROOT, guardContext, launchBrowser, launchPersistent, siteDir } from './lib/browser.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';
import {
  PARTITIONED_STORAGE_ARGS, addFrame, embedFrames, recordEvents, siteArgs, startIntruder, startWidgetServer, whenReady, widgetEvents,
} from './lib/widget.mjs';

const ARTIFACTS = path.join(ROOT, 'build', 'e2e', 'artifacts');
const PIPER_RATE = JSON.parse(fs.readFileSync(path.join(ROOT, 'public/models/piper-en-us-joe/en_US-joe-medium.onnx.json'), 'utf8')).audio.sample_rate;
const QUESTION = 'What is the capital of France?';
// the file the browser opens: pipeline.json maps the wasm provider to the int8 variant
const PIPER_FILE = '/models/piper-en-us-joe/en_US-joe-medium.wasm.onnx';

const send = (page, sel, text) => page.evaluate(([s, t]) => document.querySelector(s).send(t), [sel, text]);
const speak = (page, sel, text) => page.evaluate(async ([s, t]) => {
  const r = await document.querySelector(s).speak(t);
  return { audio_seconds: r.audio_seconds, sample_rate: r.sample_rate, wavBytes: r.wav.size, sentences: r.sentences.length };
}, [sel, text]);

// one Chromium for the tests that need no special flags; each test has its own context
let shared;
const browserForTests = async () => (shared ??= (await launchBrowser()).browser);
after(async () => shared?.close());

/** A fresh context of the shared browser with the offline guard; {context, offsite, logs}. */
async function newContext() {
  const context = await (await browserForTests()).newContext();
  return { context, ...(await guardContext(context)) };
}

test('widget.js is one small self-contained script', () => {
  const file = path.join(siteDir(), 'widget.js');
  const source = fs.readFileSync(file);
  const gzipped = zlib.gzipSync(source, { level: 9 }).length;
  process.stdout.write(`# widget.js: ${source.length} bytes, ${gzipped} bytes gzipped\n`);
  assert.ok(gzipped < 20_000, `widget.js is ${gzipped} bytes gzipped (limit 20 kB)`);
  // no static or dynamic imports: nothing else (no shared chunk, nothing heavy) loads on the host page
  assert.doesNotMatch(source.toString(), /\bimport\s*[({"'`]|\bfrom\s*["'`]/);
});

/**
 * After intruders posted: no widget frame accepted anything new or passed a request to its
 * runtime (each rejected at least ``rejectedAtLeast``), no element fired an event, and nothing
 * was posted back to the intruders.
 */
async function expectIgnored(page, before_, intruders, countBefore, { rejectedAtLeast }) {
  for (const f of intruders) assert.ok(await f.evaluate(() => window.__posted) > 0);
  await page.waitForTimeout(3000);
  const after_ = await embedFrames(page);
  for (const [i, { stats }] of after_.entries()) {
    const was = before_[i].stats;
    assert.ok(stats.rejected >= rejectedAtLeast, `frame ${i} rejected ${stats.rejected} messages`);
    assert.equal(stats.accepted, was.accepted, 'no intruder message was accepted');
    assert.equal(stats.runtimeRequests, was.runtimeRequests, 'the runtime saw no intruder request');
  }
  const newEvents = (await widgetEvents(page)).slice(countBefore);
  assert.deepEqual(newEvents, [], 'no generation started and no fake answer reached the elements');
  for (const f of intruders) assert.deepEqual(await f.evaluate(() => window.__received), [], 'nothing was posted to the third origin');
}

/**
 * For each element, whether its buttons were disabled the first time its status line started
 * with ``prefix`` (polled every 20 ms; each element is caught on its own, as they load apart):
 * {chat: {action: Send, stop}, speak: {action: Speak, stop}}.
 */
function controlsWhile(page, prefix) {
  return page.evaluate(async ([want, ms]) => {
    await Promise.all(['onnxpipe-chat', 'onnxpipe-speak'].map((tag) => customElements.whenDefined(tag)));
    const seen = {};
    const end = Date.now() + ms;
    while (!(seen.chat && seen.speak)) {
      if (Date.now() > end) throw new Error(`status "${want}…" not seen in ${ms} ms: ${JSON.stringify(seen)}`);
      for (const [name, action] of [['chat', 'send'], ['speak', 'speak']]) {
        const root = document.querySelector(`#${name}`).shadowRoot;
        const part = (p) => root.querySelector(`[part~=${p}]`);
        if (!seen[name] && (part('status')?.textContent ?? '').startsWith(want)) {
          seen[name] = { action: part(action).disabled, stop: part('stop').disabled };
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return seen;
  }, [prefix, TIMEOUTS.load]);
}

test('a host page on a second origin embeds both elements; a third origin is ignored', { timeout: TIMEOUTS.file * 2 }, async () => {
  // under the site's CSP, as users get it: a third origin framed by the host page (not onnxpipe's,
  // no policy of ours) posts to every window it can reach; the widget frame's frame-src 'self'
  // keeps it out of the widget frame itself (checked below; without the CSP: the next test).
  const server = await startWidgetServer();
  const intruder = await startIntruder();
  const { context, offsite, logs } = await newContext();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  try {
    const page = await context.newPage();
    await page.goto(server.hostUrl);
    assert.notEqual(new URL(server.hostUrl).origin, new URL(server.url).origin);
    await recordEvents(page);
    // while a model loads, its button cannot act and does not look as if it could
    const loading = await controlsWhile(page, 'Loading');
    assert.deepEqual(loading, { chat: { action: true, stop: true }, speak: { action: true, stop: true } }, 'disabled while "Loading…"');
    const chat = await whenReady(page, '#chat', TIMEOUTS.load);
    const voice = await whenReady(page, '#speak', TIMEOUTS.load);
    assert.ok(chat.info, `chat not ready: ${JSON.stringify(chat.error)}\n${logs.join('\n')}`);
    assert.ok(voice.info, `speak not ready: ${JSON.stringify(voice.error)}`);
    const ready = await controlsWhile(page, 'Ready');
    assert.deepEqual(ready, { chat: { action: false, stop: true }, speak: { action: false, stop: true } }, 'Send and Speak enabled once ready');
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
    assert.equal(chat.info.crossOriginIsolated, false);
    assert.equal(chat.info.threads, 1, 'a host page that is not cross-origin isolated runs one thread');
    assert.equal(voice.info.kind, 'speech');

    const answer = await send(page, '#chat', QUESTION);
    assert.match(answer, /Paris/, `the answer: ${answer}`);
    const events = await widgetEvents(page);
    const tokens = events.filter((e) => e.type === 'onnxpipe-token' && e.target === 'onnxpipe-chat');
    assert.ok(tokens.length > 1, `tokens streamed as events (${tokens.length})`);
    assert.equal(tokens.map((e) => e.detail.text).join('').trim(), answer.trim());
    assert.ok(events.some((e) => e.type === 'onnxpipe-progress'), 'download progress was reported');
    assert.ok(events.some((e) => e.type === 'onnxpipe-done' && e.target === 'onnxpipe-chat'));
    // the UI shows the conversation
    assert.match(await page.locator('#chat .msg.assistant').last().textContent(), /Paris/);

    const spoken = await speak(page, '#speak', 'Hello from the widget. It speaks in sentences.');
    assert.ok(spoken.audio_seconds > 0, JSON.stringify(spoken));
    assert.equal(spoken.sample_rate, PIPER_RATE);
    assert.ok(spoken.wavBytes > 44 && spoken.sentences === 2, JSON.stringify(spoken));
    await page.locator('#speak audio').waitFor({ state: 'visible' });
    await page.screenshot({ path: path.join(ARTIFACTS, 'widget-host.png'), fullPage: true });

    // a third origin, framed by the host page, posts well-formed requests to every window it
    // can reach and fake frame answers to the host page; the widget frames refuse to frame it
    const before_ = await embedFrames(page);
    assert.equal(before_.length, 2);
    assert.ok(before_.every((f) => f.stats?.accepted >= 1 && f.stats.rejected === 0), JSON.stringify(before_.map((f) => f.stats)));
    const countBefore = (await widgetEvents(page)).length;
    const intruders = [await addFrame(page, page.mainFrame(), intruder.url)];
    assert.ok(intruders[0], 'the host page framed the third origin');
    for (const { frame } of before_) {
      assert.equal(await addFrame(page, frame, intruder.url), undefined, "the widget frame's CSP refuses to frame the third origin");
    }
    await expectIgnored(page, before_, intruders, countBefore, { rejectedAtLeast: 0 });
    // the elements still work, and answered nothing from the intruder
    assert.match(await send(page, '#chat', 'And of Italy?'), /Rome/);

    // removing an element removes its frame; the other keeps working
    await page.evaluate(() => document.querySelector('#speak').remove());
    assert.equal((await embedFrames(page)).length, 1);
    assert.deepEqual(offsite, []);
    await page.close();
  } finally {
    await context.close();
    await intruder.stop();
    await server.stop();
  }
});

test("without the CSP, the widget frame's own checks ignore a third origin inside it", { timeout: TIMEOUTS.file * 2 }, async () => {
  // defence in depth: with the policy off (a server that drops the header), a third-origin page
  // framed inside each widget frame posts requests to it as its child; the frame's source and
  // origin checks alone must drop them
  const server = await startWidgetServer({ csp: false });
  const intruder = await startIntruder();
  const { context, offsite } = await newContext();
  try {
    const page = await context.newPage();
    await page.goto(server.hostUrl);
    await recordEvents(page);
    for (const sel of ['#chat', '#speak']) {
      const ready = await whenReady(page, sel, TIMEOUTS.load);
      assert.ok(ready.info, `${sel} not ready: ${JSON.stringify(ready.error)}`);
    }
    const before_ = await embedFrames(page);
    assert.equal(before_.length, 2);
    const countBefore = (await widgetEvents(page)).length;
    const intruders = [];
    for (const { frame } of before_) intruders.push(await addFrame(page, frame, intruder.url));
    assert.equal(intruders.filter(Boolean).length, 2, 'without the CSP both widget frames framed the third origin');
    await expectIgnored(page, before_, intruders, countBefore, { rejectedAtLeast: 3 });
    assert.match(await send(page, '#chat', QUESTION), /Paris/);
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    await intruder.stop();
    await server.stop();
  }
});

test('a host not on the frame-ancestors allow-list cannot frame it', { timeout: TIMEOUTS.file }, async () => {
  const server = await startWidgetServer({ frameAncestors: "'self' http://127.0.0.1:1" });
  const { context, offsite } = await newContext();
  const consoleLines = [];
  try {
    const page = await context.newPage();
    page.on('console', (m) => consoleLines.push(m.text()));
    await page.goto(server.hostUrl);
    await recordEvents(page);
    const t0 = Date.now();
    const chat = await whenReady(page, '#chat', 60_000);
    assert.equal(chat.error?.kind, 'embed', JSON.stringify(chat));
    assert.match(chat.error.message, /frame-ancestors/);
    assert.ok(Date.now() - t0 < 40_000, 'reported within the hello timeout');
    const errors = (await widgetEvents(page)).filter((e) => e.type === 'onnxpipe-error');
    assert.ok(errors.some((e) => e.target === 'onnxpipe-chat' && e.detail.kind === 'embed'), JSON.stringify(errors));
    // the frame's document never ran: no frame has the embed page's counters
    const frames = await embedFrames(page);
    assert.ok(frames.every((f) => f.stats === null), JSON.stringify(frames.map((f) => f.stats)));
    assert.ok(consoleLines.some((l) => /frame-ancestors/.test(l)), `a CSP violation was logged: ${consoleLines.join('\n')}`);
    // the status line says so
    assert.match(await page.locator('#chat .status').textContent(), /frame-ancestors/);
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

test("the host page's aggressive CSS neither breaks the widget nor is changed by it", { timeout: TIMEOUTS.file * 2 }, async () => {
  const server = await startWidgetServer({ hostDir: 'tests/e2e/fixtures/widget' });
  const { context, offsite } = await newContext();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  try {
    const page = await context.newPage();
    await page.goto(server.hostUrl);
    const probe = () => page.evaluate(() => {
      const pick = (el) => { const s = getComputedStyle(el); return { color: s.color, background: s.backgroundColor, display: s.display, font: s.fontFamily, radius: s.borderRadius }; };
      return { root: pick(document.querySelector('#probe-root')), msg: pick(document.querySelector('#probe-msg')), button: pick(document.querySelector('#probe-button')) };
    });
    const before_ = await probe();
    const chat = await whenReady(page, '#chat', TIMEOUTS.load);
    assert.ok(chat.info, JSON.stringify(chat.error));
    assert.ok((await whenReady(page, '#speak', TIMEOUTS.load)).info);
    for (const sel of ['#chat', '#speak']) {
      const box = await page.locator(sel).boundingBox();
      assert.ok(box && box.width >= 200 && box.height >= 100, `${sel} lays out: ${JSON.stringify(box)}`);
    }
    const send_ = page.locator('#chat button', { hasText: 'Send' });
    assert.ok(await send_.isVisible(), 'the send button is visible');
    const look = await page.locator('#chat .root').evaluate((el) => { const s = getComputedStyle(el); return { color: s.color, letterSpacing: s.letterSpacing, transform: s.textTransform }; });
    assert.notEqual(look.color, 'rgb(200, 0, 0)', 'the host colour does not reach inside');
    assert.notEqual(look.transform, 'uppercase');
    await page.locator('#chat textarea').fill(QUESTION);
    await send_.click();
    await page.locator('#chat .msg.assistant:not(.streaming)').waitFor({ timeout: TIMEOUTS.generate });
    assert.match(await page.locator('#chat .msg.assistant').textContent(), /Paris/);
    assert.deepEqual(await probe(), before_, "the widget's styles do not leak onto the host's elements");
    await page.screenshot({ path: path.join(ARTIFACTS, 'widget-host-aggressive-css.png'), fullPage: true });
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

test('a cross-origin isolated host gets more than one thread', { timeout: TIMEOUTS.file * 2 }, async () => {
  const server = await startWidgetServer({ isolatedHost: true });
  const { context, offsite } = await newContext();
  try {
    const page = await context.newPage();
    await page.goto(server.hostUrl);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, 'the host page is isolated');
    await page.evaluate(() => document.querySelector('#speak').remove());   // one model at a time on 2 cores
    const chat = await whenReady(page, '#chat', TIMEOUTS.load);
    assert.ok(chat.info, JSON.stringify(chat.error));
    assert.equal(chat.info.crossOriginIsolated, true);
    assert.ok(chat.info.threads > 1, `threads: ${chat.info.threads}`);
    assert.match(await send(page, '#chat', QUESTION), /Paris/);
    // cancel() stops a reply after its first token; send() resolves with what was made
    const cut = await page.evaluate(async () => {
      const el = document.querySelector('#chat');
      let tokens = 0;
      let done = null;
      el.addEventListener('onnxpipe-token', () => { if (++tokens === 1) el.cancel(); });
      el.addEventListener('onnxpipe-done', (e) => { done = e.detail; }, { once: true });
      el.setAttribute('max-new-tokens', '400');
      const text = await el.send('Write a long story about a dragon who learns to fly.');
      return { text, tokens, done };
    });
    assert.ok(cut.tokens >= 1 && cut.tokens < 40, `stopped after ${cut.tokens} tokens: ${JSON.stringify(cut)}`);
    assert.equal(cut.done.finishReason, 'cancelled', JSON.stringify(cut.done));
    // a threads attribute overrides the choice (and a new value reloads the bundle)
    await page.evaluate(() => document.querySelector('#chat').setAttribute('threads', '1'));
    const again = await whenReady(page, '#chat', TIMEOUTS.load);
    assert.equal(again.info?.threads, 1, JSON.stringify(again));
    assert.deepEqual(offsite, []);
  } finally {
    await context.close();
    await server.stop();
  }
});

test('storage partitioning: which embeddings download the model again (prints figures)', { timeout: TIMEOUTS.file * 3 }, async () => {
  const server = await startWidgetServer({ hostDir: 'tests/e2e/fixtures/widget', mounts: { '/e2e-widget/': 'tests/e2e/fixtures/widget' } });
  const h = server.hostPort;
  const size = (fs.statSync(path.join(ROOT, 'public', PIPER_FILE)).size / 1e6).toFixed(0);
  const visit = async (context, label, url) => {
    const before_ = server.requests(PIPER_FILE);
    const page = await context.newPage();
    await page.goto(url);
    const ready = await whenReady(page, '#speak', TIMEOUTS.load);
    const frames = await embedFrames(page);
    const usage = await frames[0].frame.evaluate(async () => (await navigator.storage.estimate()).usage).catch(() => null);
    await page.close();
    return {
      visit: label, downloads: server.requests(PIPER_FILE) - before_, loaded: Boolean(ready.info), warnings: ready.info?.warnings ?? [],
      error: ready.error ? `${ready.error.kind}: ${ready.error.message.slice(0, 90)}` : null,
      storageMB: usage === null ? null : +(usage / 1e6).toFixed(1),
    };
  };
  const print = (title, figures) => {
    process.stdout.write(`# ${title} (${PIPER_FILE}, ${size} MB):\n`);
    for (const f of figures) {
      process.stdout.write(`#   ${f.visit.padEnd(48)} downloads ${f.downloads}  loaded ${f.loaded}  frame storage ${f.storageMB} MB${f.error ? `  error ${f.error}` : ''}\n`);
    }
  };
  const sites = ['site-a.test', 'site-b.test'];
  const profiles = [];
  try {
    // 1. Chrome's default: third-party storage partitioned by top-level site, one persistent profile
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-widget-partition-'));
    profiles.push(profile);
    const { context, offsite } = await launchPersistent(profile, { args: [...siteArgs(sites, h), ...PARTITIONED_STORAGE_ARGS] });
    const figures = [];
    for (const [label, url] of [
      ['embedded on site A', `http://site-a.test:${h}/partition.html`],
      ['embedded on site B', `http://site-b.test:${h}/partition.html`],
      ['onnxpipe origin, top level', `${server.url}e2e-widget/top.html`],
      ['embedded on site A again', `http://site-a.test:${h}/partition.html`],
      ['embedded on 127.0.0.1:<other port> (same site)', `http://127.0.0.1:${h}/partition.html`],
    ]) figures.push(await visit(context, label, url));
    await context.close();
    print('storage partitioned by top-level site (Chrome default)', figures);
    assert.ok(figures.every((f) => f.loaded), JSON.stringify(figures));
    assert.equal(figures[0].downloads, 1, 'the first visit downloads the model');
    assert.equal(figures[3].downloads, 0, 'a second visit on the same site loads from storage');
    assert.deepEqual(offsite, []);

    // 2. third-party storage blocked, not partitioned (Playwright's default Chromium switches)
    const blockedProfile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-widget-blocked-'));
    profiles.push(blockedProfile);
    const blocked = await launchPersistent(blockedProfile, { args: siteArgs(sites, h) });
    const blockedFigures = [];
    for (const label of ['embedded on site A', 'embedded on site A again']) {
      blockedFigures.push(await visit(blocked.context, label, `http://site-a.test:${h}/partition.html`));
    }
    await blocked.context.close();
    print('third-party storage blocked (no partitioning)', blockedFigures);
    // no storage: the bundle loads from memory on every visit, and says so
    assert.ok(blockedFigures.every((f) => f.loaded), JSON.stringify(blockedFigures));
    assert.deepEqual(blockedFigures.map((f) => f.downloads), [1, 1], 'nothing can be stored: every visit downloads');
    assert.ok(blockedFigures.every((f) => f.warnings.some((w) => /fetched on every visit/.test(w))), JSON.stringify(blockedFigures));
    assert.deepEqual(blocked.offsite, []);
  } finally {
    await server.stop();
    for (const p of profiles) fs.rmSync(p, { recursive: true, force: true });
  }
});
