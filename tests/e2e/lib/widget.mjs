// Helpers for the widget tests (tests/e2e/widget.test.mjs): tools/serve.py with its host page
// (a second origin), a third-origin "intruder" page, and driving <onnxpipe-chat>/<onnxpipe-speak>
// through their scripted API (el.ready, el.send, el.speak, onnxpipe-* events).
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { ROOT, python, siteDir } from './browser.mjs';
import { TAG_FOR_TESTS } from './widget-protocol.mjs';

/**
 * tools/serve.py on a free port, plus its host page (--host-page-port 0) from ``hostDir``.
 * Resolves to {url, hostUrl, stop(), requests(pathname)}: requests() counts the GETs of a path
 * seen in the server's request log (the worker's downloads, wherever the frame runs).
 */
export async function startWidgetServer({ hostDir = 'examples/embed', frameAncestors, isolatedHost = false, mounts = {}, csp = true } = {}) {
  const args = [path.join(ROOT, 'tools', 'serve.py'), '--port', '0', '--root', siteDir(), '--host-page-port', '0', '--host-page-dir', hostDir];
  if (!csp) args.push('--no-csp');
  if (frameAncestors) args.push('--frame-ancestors', frameAncestors);
  if (isolatedHost) args.push('--host-page-isolated');
  for (const [prefix, dir] of Object.entries(mounts)) args.push('--mount', `${prefix}=${dir}`);
  const proc = spawn(python(), args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  readline.createInterface({ input: proc.stderr }).on('line', (line) => log.push(line));
  const out = readline.createInterface({ input: proc.stdout });
  const found = {};
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tools/serve.py did not start in 15 s: ${log.join('\n')}`)), 15000);
    proc.once('exit', (code) => reject(new Error(`tools/serve.py exited (${code}): ${log.join('\n')}`)));
    out.on('line', (line) => {
      const m = /^serving (http:\/\/\S+)/.exec(line) ?? /^host page (http:\/\/\S+)/.exec(line);
      if (m) found[line.startsWith('serving') ? 'url' : 'hostUrl'] = m[1];
      if (found.url && found.hostUrl) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const stop = () => new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    proc.once('exit', () => resolve());
    proc.kill('SIGTERM');
  });
  // http.server's log: '127.0.0.1 - - [date] "GET /models/x HTTP/1.1" 200 -'
  const requests = (pathname) => log.filter((l) => l.includes(`"GET ${pathname} `)).length;
  return { ...found, port: Number(new URL(found.url).port), hostPort: Number(new URL(found.hostUrl).port), stop, requests };
}

/**
 * A third origin's page. Wherever it is framed it posts well-formed widget requests (load,
 * send, speak) to its parent, its parent's frames and the top window, and fake frame
 * answers (hello, token, replied, error for ids 1-20) to its parent and the top window; it
 * records whatever it is sent back in window.__received. Served with COEP/CORP so it may also be
 * framed inside a (cross-origin isolated) widget frame.
 */
export async function startIntruder() {
  const html = `<!doctype html><meta charset="utf-8"><title>intruder</title><script>
    window.__received = [];
    window.__posted = 0;
    window.addEventListener('message', (e) => window.__received.push({ origin: e.origin, data: JSON.stringify(e.data) }));
    const tag = ${JSON.stringify(TAG_FOR_TESTS)};
    const requests = [
      { onnxpipe: tag, type: 'load', id: 1, bundle: location.origin + '/nothing/', threads: null },
      { onnxpipe: tag, type: 'send', id: 2, messages: [{ role: 'user', content: 'Say something' }], maxNewTokens: 8 },
      { onnxpipe: tag, type: 'speak', id: 3, text: 'Hello there.' },
    ];
    const answers = [{ onnxpipe: tag, type: 'hello', kind: 'chat', crossOriginIsolated: false }];
    for (let id = 1; id <= 20; id++) {
      answers.push({ onnxpipe: tag, type: 'token', id, text: 'INTRUDER' });
      answers.push({ onnxpipe: tag, type: 'replied', id, text: 'INTRUDER', finishReason: 'stop' });
      answers.push({ onnxpipe: tag, type: 'error', id, kind: 'engine', message: 'INTRUDER' });
    }
    const targets = new Set([parent, top]);
    for (let i = 0; i < parent.frames.length; i++) if (parent.frames[i] !== window) targets.add(parent.frames[i]);
    for (const w of targets) for (const m of [...requests, ...answers]) { w.postMessage(m, '*'); window.__posted++; }
  </script>`;
  const server = http.createServer((req, res) => {
    res.writeHead(200, {
      'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache',
      'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'cross-origin',
    });
    res.end(html);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}/`;
  return { url, stop: () => new Promise((resolve) => server.close(resolve)) };
}

/** Frame ``url`` into ``frame``'s document (a page or a frame); resolves with the new Frame, or undefined where it did not load (a CSP refused it). */
export async function addFrame(page, frame, url) {
  await frame.evaluate((u) => new Promise((resolve) => {
    const f = document.createElement('iframe');
    f.src = u;
    f.onload = resolve;
    // a frame the CSP refuses may never fire load
    setTimeout(resolve, 5000);
    document.body.append(f);
  }), url);
  return page.frames().find((f) => f.url() === url && f.parentFrame() === frame);
}

/** Wait for both elements to be defined and ``selector``'s element ready; its info (or the error). */
export async function whenReady(page, selector, timeout) {
  return page.evaluate(async ([sel, ms]) => {
    await customElements.whenDefined(document.querySelector(sel).localName);
    const el = document.querySelector(sel);
    const limit = new Promise((_, reject) => setTimeout(() => reject(new Error(`${sel}: not ready in ${ms} ms`)), ms));
    try {
      return { info: await Promise.race([el.ready, limit]) };
    } catch (e) {
      return { error: { name: e.name, kind: e.kind ?? null, message: e.message } };
    }
  }, [selector, timeout]);
}

/** Record the onnxpipe-* events of every element on the page in window.__widgetEvents. */
export async function recordEvents(page) {
  await page.evaluate(() => {
    window.__widgetEvents = [];
    for (const type of ['onnxpipe-progress', 'onnxpipe-token', 'onnxpipe-done', 'onnxpipe-error']) {
      document.addEventListener(type, (e) => window.__widgetEvents.push({ type, target: e.target.localName, detail: JSON.parse(JSON.stringify(e.detail)) }));
    }
  });
}

export const widgetEvents = (page) => page.evaluate(() => window.__widgetEvents);

/** The widget frames (embed.html) of a page, each with its counters (web/src/embed/main.ts). */
export async function embedFrames(page) {
  const frames = page.frames().filter((f) => new URL(f.url(), 'http://x/').pathname === '/embed.html');
  return Promise.all(frames.map(async (frame) => ({ frame, stats: await frame.evaluate(() => window.__onnxpipeEmbed ?? null).catch(() => null) })));
}

/**
 * Chromium flags that restore Chrome's default third-party storage partitioning.
 * playwright-core launches Chromium with `--disable-features=<list>` that includes
 * ThirdPartyStoragePartitioning (its issue 32230); a later --disable-features replaces that list,
 * so this is its list without that one entry (the others keep Chromium off the network).
 */
export const PARTITIONED_STORAGE_ARGS = [
  '--disable-features=' + [
    'AvoidUnnecessaryBeforeUnloadCheckSync', 'DestroyProfileOnBrowserClose', 'HttpsUpgrades',
    'HttpsFirstBalancedModeAutoEnable', 'LensOverlay', 'MediaRouter', 'PaintHolding',
    'AvoidCorsURLLoaderRestartOnRedirect', 'TcpPortRandomizationWin', 'OptimizationHints',
    'NetworkTimeServiceQuerying', 'AimEnabled', 'PreconnectToSearch',
  ].join(','),
];

/** Chromium flags giving distinct sites that all resolve to 127.0.0.1, treated as secure. */
export const siteArgs = (names, port) => [
  `--host-resolver-rules=${names.map((n) => `MAP ${n} 127.0.0.1`).join(',')}`,
  `--unsafely-treat-insecure-origin-as-secure=${names.map((n) => `http://${n}:${port}`).join(',')}`,
];
