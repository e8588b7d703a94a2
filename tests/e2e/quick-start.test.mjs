// Quick start (docs/quick-start.md): the chat page starts the runtime as it opens and shows its
// WASM thread count and why; a second visit restores Python from this device's snapshot and
// runs a bundle with it. Threads: cross-origin isolated -> the worker's rule, and the loaded
// runtime uses that count; an explicit count wins; not isolated -> 1, saying why. The small
// Silero VAD bundle keeps this fast. (The time-to-first-token line is checked in chat.test.mjs,
// which already sends a chat turn through the page.)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, isLocal, launchBrowser, siteDir, startServer } from './lib/browser.mjs';
import { detectSpeech, loadBundle, openRuntimePage } from './lib/runtime.mjs';
import { TIMEOUTS } from './lib/timeouts.mjs';

const BUNDLE = path.join(ROOT, 'public', 'models', 'silero-vad');
const built = fs.existsSync(path.join(BUNDLE, 'silero_vad_v5.onnx'));

let server;
before(async () => {
  if (built) server = await startServer({ root: siteDir() });
});
after(async () => {
  await server?.stop();
});

/** The threads line the chat page shows once its runtime has started. */
async function shownThreads(page) {
  await page.getByTestId('threads').waitFor({ state: 'visible', timeout: TIMEOUTS.load });
  const line = page.getByTestId('threads');
  return { threads: Number(await line.getAttribute('data-threads')), reason: await line.getAttribute('data-reason'), text: await line.textContent() };
}

describe('quick start', { skip: built ? false : 'public/models/silero-vad not built: run make models', timeout: TIMEOUTS.file }, () => {
  test('isolated: threads by the rule, shown and used; the second visit restores Python from its snapshot', async () => {
    const { browser, context, offsite, logs } = await launchBrowser();
    try {
      const url = `${server.url}models/silero-vad/`;
      const page = await openRuntimePage(context, server.url);
      const facts = await page.evaluate(() => ({ isolated: self.crossOriginIsolated, cores: navigator.hardwareConcurrency }));
      assert.equal(facts.isolated, true);
      const shown = await shownThreads(page);
      assert.deepEqual({ threads: shown.threads, reason: shown.reason }, { threads: Math.min(facts.cores, 4), reason: 'rule' }, shown.text);
      const first = await loadBundle(page, url);   // no threads asked: the runtime the page started
      assert.equal(first.info.threads, shown.threads, 'the loaded runtime runs the count shown');
      assert.equal(first.info.threads_reason, 'rule');
      assert.equal(first.info.startup.python_snapshot, 'made', 'the first visit keeps a snapshot for the next');
      assert.equal((await shownThreads(page)).threads, first.info.threads);
      await page.close();

      const again = await openRuntimePage(context, server.url);
      const second = await loadBundle(again, url);
      assert.equal(second.info.startup.python_snapshot, 'restored', JSON.stringify(second.info.startup));
      const names = second.info.startup.stages.map((s) => s.name);
      for (const stage of ['pyodide', 'onnxruntime', 'import', 'files', 'session']) assert.ok(names.includes(stage), `${stage} in ${names}`);
      for (const s of second.info.startup.stages) assert.ok(s.end >= s.start, JSON.stringify(s));
      // the restored interpreter runs the bundle: half a second of a 440 Hz tone, then silence
      const samples = Array.from({ length: 16000 }, (_, i) => (i < 8000 ? 0.5 * Math.sin((2 * Math.PI * 440 * i) / 16000) : 0));
      const { result } = await detectSpeech(again, samples, 16000);
      assert.equal(result.chunks, Math.ceil(16000 / result.chunk_size));
      assert.equal(result.probabilities.length, result.chunks);

      // an explicit count wins (a fresh worker: the booted one runs the rule's count)
      const one = await loadBundle(again, url, { threads: 1 });
      assert.deepEqual([one.info.threads, one.info.threads_reason], [1, 'explicit']);
      assert.deepEqual(offsite, []);
    } catch (error) {
      console.error(logs.slice(-30).join('\n'));
      throw error;
    } finally {
      await browser.close();
    }
  });

  test('not isolated: one thread, and the page says why', async () => {
    const { browser, context, offsite, logs } = await launchBrowser();
    try {
      // the same site without COOP/COEP: no SharedArrayBuffer, so no threads
      await context.route('**/*', async (route) => {
        if (!isLocal(route.request().url())) return route.fallback();
        const response = await route.fetch();
        const headers = { ...response.headers() };
        delete headers['cross-origin-opener-policy'];
        delete headers['cross-origin-embedder-policy'];
        return route.fulfill({ response, headers });
      });
      const page = await openRuntimePage(context, server.url);
      assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
      const shown = await shownThreads(page);
      assert.deepEqual({ threads: shown.threads, reason: shown.reason }, { threads: 1, reason: 'not isolated' }, shown.text);
      assert.match(shown.text, /not cross-origin isolated/);
      const loaded = await loadBundle(page, `${server.url}models/silero-vad/`, { threads: 2 });
      assert.deepEqual([loaded.info.threads, loaded.info.threads_reason], [1, 'not isolated']);
      assert.deepEqual(offsite, []);
    } catch (error) {
      console.error(logs.slice(-30).join('\n'));
      throw error;
    } finally {
      await browser.close();
    }
  });
});
