// Memory of a page's runtime worker: its wasm heaps (client.wasmMemory(), summed) and its JS
// heap (V8's used size after a forced GC, read over the DevTools protocol: a dedicated worker
// has no performance.memory, and performance.measureUserAgentSpecificMemory waits for a GC of
// its own). ORT's thread workers (named em-pthread) are left out of the JS heap.
//
//   const probe = await memoryProbe(browser, page, server.url);
//   const { wasm_bytes, js_heap_bytes } = await probe.sample();
//   probe.close();

/** A sampler for the runtime worker of ``page``, whose site is served at ``origin``. */
export async function memoryProbe(browser, page, origin) {
  const cdp = await browser.newBrowserCDPSession();
  const sessions = new Map();   // targetId -> sessionId (non-flat: Playwright's own stay untouched)
  const waiting = new Map();
  let next = 0;
  cdp.on('Target.receivedMessageFromTarget', ({ message }) => {
    const reply = JSON.parse(message);
    waiting.get(reply.id)?.(reply);
    waiting.delete(reply.id);
  });
  const call = (sessionId, method, params = {}) => new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, (reply) => (reply.error ? reject(new Error(`${method}: ${reply.error.message}`)) : resolve(reply.result)));
    cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject);
  });

  /** The runtime worker's session: found anew each time (a load may replace the worker). ORT's
   * thread workers are told apart by their name (the target's title): evaluating anything in
   * one would wait forever, they sit in Atomics.wait. */
  async function runtimeWorker() {
    const { targetInfos } = await cdp.send('Target.getTargets');
    const t = targetInfos.find((x) => x.type === 'worker' && x.url.startsWith(origin) && !x.title.startsWith('em-pthread'));
    if (!t) throw new Error(`no runtime worker of ${origin} among the browser's targets`);
    if (!sessions.has(t.targetId)) {
      const { sessionId } = await cdp.send('Target.attachToTarget', { targetId: t.targetId, flatten: false });
      sessions.set(t.targetId, sessionId);
    }
    return sessions.get(t.targetId);
  }

  return {
    async sample() {
      const wasm = await page.evaluate(() => window.__onnxpipe.client.wasmMemory());
      const sessionId = await runtimeWorker();
      await call(sessionId, 'HeapProfiler.collectGarbage');
      const { usedSize } = await call(sessionId, 'Runtime.getHeapUsage');
      return { wasm_bytes: (wasm.ort_bytes ?? 0) + (wasm.python_bytes ?? 0), js_heap_bytes: usedSize };
    },
    close: () => cdp.detach().catch(() => {}),
  };
}

/** Samples -> {wasm_bytes: [first, last], js_heap_bytes: [first, last], *_max, samples}. */
export function memorySummary(samples) {
  const out = { samples: samples.length };
  for (const key of ['wasm_bytes', 'js_heap_bytes']) {
    const values = samples.map((s) => s[key]);
    out[key] = [values[0], values.at(-1)];
    out[`${key.replace('_bytes', '')}_max_bytes`] = Math.max(...values);
  }
  return out;
}
