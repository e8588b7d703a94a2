// Shared end-to-end helpers: build the site, serve it with tools/serve.py, launch Debian
// Chromium through playwright-core with the network closed except for 127.0.0.1.
//
//   const site = await siteDir();                       // dist/ built fresh (or ONNXPIPE_E2E_DIST)
//   const server = await startServer({ root: site, mounts: { '/e2e/': 'tests/e2e/fixtures' } });
//   const { browser, context, offsite } = await launchBrowser();
//   ... context.newPage(), page.goto(server.url + 'e2e/boot.html') ...
//   assert.deepEqual(offsite, []);                      // nothing tried to leave 127.0.0.1
//   await browser.close(); await server.stop();
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Chromium flags that make ``wavPath`` the microphone (getUserMedia answers at once, no
 * prompt). Chromium plays the file in a loop unless ``loop`` is false (its `%noloop` suffix:
 * then silence follows the file). Audio may start without a user gesture, so a page can play
 * the reply it made.
 */
export function fakeMicrophoneFlags(wavPath, { loop = false } = {}) {
  return [
    '--use-fake-device-for-media-stream',
    '--use-fake-ui-for-media-stream',
    `--use-file-for-fake-audio-capture=${wavPath}${loop ? '' : '%noloop'}`,
    '--autoplay-policy=no-user-gesture-required',
  ];
}

export function python() {
  if (process.env.PYTHON) return process.env.PYTHON;
  const venv = path.join(ROOT, '.venv', 'bin', 'python');
  return fs.existsSync(venv) ? venv : 'python3';
}

/** Run a fresh `vite build` into outDir (default: a private folder under build/e2e/). */
export function buildSite(outDir = path.join(ROOT, 'build', 'e2e', `dist-${process.pid}`)) {
  const t0 = performance.now();
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--outDir', outDir, '--logLevel', 'warn'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, CI: 'true' },
  });
  process.stderr.write(`# vite build -> ${path.relative(ROOT, outDir)} in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  return outDir;
}

let built;
/**
 * The built site to test. `make test` builds dist/ once (make web) and sets ONNXPIPE_E2E_DIST;
 * a bare `node --test tests/e2e/` builds fresh into build/e2e/dist-<pid>/ (removed at exit), so
 * test files running in parallel never share an output folder.
 */
export function siteDir() {
  if (built) return built;
  const given = process.env.ONNXPIPE_E2E_DIST;
  if (given) {
    built = path.resolve(ROOT, given);
    if (!fs.existsSync(path.join(built, 'index.html'))) throw new Error(`ONNXPIPE_E2E_DIST=${given}: no index.html (run make web)`);
    return built;
  }
  built = buildSite();
  process.on('exit', () => fs.rmSync(built, { recursive: true, force: true }));
  return built;
}

/**
 * Start tools/serve.py on a free port. mounts: {'/prefix/': 'dir relative to repo root'}.
 * Resolves to {url: 'http://127.0.0.1:PORT/', port, stop()}.
 */
export async function startServer({ root = siteDir(), models, mounts = {}, csp = true, isolated = true, cors = false } = {}) {
  const args = [path.join(ROOT, 'tools', 'serve.py'), '--port', '0', '--quiet', '--root', root];
  if (models) args.push('--models', models);
  if (!csp) args.push('--no-csp');   // benchmarks' pages of other runtimes (docs/security.md)
  if (!isolated) args.push('--no-isolation');   // no COOP/COEP: one WASM thread
  if (cors) args.push('--cors');   // readable from any origin, as a CDN
  for (const [prefix, dir] of Object.entries(mounts)) args.push('--mount', `${prefix}=${dir}`);
  const proc = spawn(python(), args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: proc.stdout });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('tools/serve.py did not start in 15 s')), 15000);
    proc.once('exit', (code) => reject(new Error(`tools/serve.py exited (${code})`)));
    lines.on('line', (line) => {
      const m = /^serving (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  lines.on('line', () => {}); // keep draining
  const stop = () =>
    new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    });
  return { url, port: Number(new URL(url).port), proc, stop };
}

/** Host-name patterns that `--host-resolver-rules=MAP <pattern> 127.0.0.1` in ``args`` sends to
 * 127.0.0.1 (e.g. `*.test`, so tests get distinct sites): requests to them stay local too. */
export function namesMappedToLoopback(args = []) {
  const rules = args.filter((a) => a.startsWith('--host-resolver-rules=')).flatMap((a) => a.slice(22).split(','));
  return rules
    .map((rule) => /^\s*MAP\s+(\S+)\s+127\.0\.0\.1\s*$/.exec(rule)?.[1])
    .filter(Boolean)
    .map((pattern) => new RegExp(`^${pattern.replace(/[.]/g, '\\.').replace(/\*/g, '[a-z0-9-]+')}$`, 'i'));
}

export function isLocal(url, mapped = []) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if (u.protocol === 'data:' || u.protocol === 'blob:' || u.protocol === 'about:') return true;
  return u.hostname === '127.0.0.1' || mapped.some((re) => re.test(u.hostname));
}

/**
 * Launch Chromium (fresh profile: Playwright gives every launch a new temporary
 * --user-data-dir) and one context whose every request not to 127.0.0.1 is aborted and
 * recorded in `offsite` (assert it stays empty). `logs` gathers page/worker console lines.
 * `fakeMicrophone`: a WAV played once as the microphone (fakeMicrophoneFlags).
 */
export async function launchBrowser({ args = [], contextOptions = {}, fakeMicrophone } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} missing: run make web-deps`);
  if (fakeMicrophone) args = [...args, ...fakeMicrophoneFlags(fakeMicrophone)];
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_FLAGS, ...args],
    env: { ...process.env, TMPDIR: os.tmpdir() },
  });
  const context = await browser.newContext(contextOptions);
  return { browser, context, ...(await guardContext(context, namesMappedToLoopback(args))) };
}

/**
 * Abort (and record in `offsite`) every request of `context` not to 127.0.0.1; gather
 * page/worker console lines in `logs`. Used by launchBrowser and launchPersistent.
 */
export async function guardContext(context, mapped = []) {
  const offsite = [];
  const logs = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (isLocal(url, mapped)) return route.continue();
    if (!offsite.includes(url)) offsite.push(url);
    return route.abort('blockedbyclient');
  });
  context.on('request', (req) => {
    if (!isLocal(req.url(), mapped) && !offsite.includes(req.url())) offsite.push(req.url());
  });
  const watch = (page) => {
    page.on('console', (msg) => logs.push(`[page ${msg.type()}] ${msg.text()}`));
    page.on('pageerror', (err) => logs.push(`[page error] ${err.message}`));
    page.on('websocket', (ws) => {
      if (!isLocal(ws.url(), mapped)) offsite.push(ws.url());
    });
    page.on('worker', (w) => logs.push(`[worker] ${w.url()}`));
  };
  context.on('page', watch);
  for (const page of context.pages()) watch(page);
  return { offsite, logs };
}

/**
 * A persistent context (its profile in userDataDir survives close/relaunch: Cache API,
 * HTTP cache), guarded like launchBrowser. Resolves to {context, offsite, logs}; close the context.
 */
export async function launchPersistent(userDataDir, { args = [], contextOptions = {}, fakeMicrophone } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} missing: run make web-deps`);
  if (fakeMicrophone) args = [...args, ...fakeMicrophoneFlags(fakeMicrophone)];
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_FLAGS, ...args],
    env: { ...process.env, TMPDIR: os.tmpdir() },
    ...contextOptions,
  });
  return { context, ...(await guardContext(context, namesMappedToLoopback(args))) };
}
