#!/usr/bin/env node
// Time to first token on the chat page, cold and warm, with the page's own breakdown
// (docs/quick-start.md). Not a test. Per visit: open the page, press Load (SmolLM2, WASM) as
// soon as it can be pressed, send a question as soon as the model is loaded; the time is from
// the page's navigation start to the first token in the reply bubble.
//   cold     a fresh browser profile: nothing stored (the model downloads from 127.0.0.1)
//   warm     a new tab in the same browser: model stored, runtime caches filled
//   restart  the browser closed and started again on that profile
// With --baseline DIR (another build, e.g. of the previous commit) both builds are measured
// in turns in one run and the ratios printed: absolute figures on a shared machine mean little.
//
//   node bench/browser_start.mjs [--dist DIR] [--baseline DIR] [--warm 2] [--rounds 1] [--json]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_FLAGS, ROOT, startServer } from '../tests/e2e/lib/browser.mjs';
import { ensureSite } from '../tests/e2e/lib/runtime.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : dflt;
};
const DIST_ARG = opt('--dist', null);   // default: dist/, rebuilt when older than its sources
const BASELINE = opt('--baseline', null);
const WARM = Number(opt('--warm', 2));
const ROUNDS = Number(opt('--rounds', 1));
const JSON_OUT = args.includes('--json');
const BUNDLE = 'smollm2-135m-instruct';
const QUESTION = 'What is the capital of France?';
const log = (m) => process.stderr.write(`${m}\n`);

/** One visit through the UI; resolves to {ttftMs, parts, stages, snapshot, threads}. */
async function visit(context, url) {
  const page = await context.newPage();
  try {
    await page.goto(url);
    await page.waitForFunction(() => document.querySelector('[data-testid=bundle-select] option')
      && !document.querySelector('[data-testid=load-button]').disabled, null, { timeout: 60_000, polling: 10 });
    await page.getByTestId('bundle-select').selectOption(BUNDLE);
    await page.getByTestId('max-new-tokens').fill('8');
    await page.evaluate(() => {
      // the first text in the reply bubble, on the page's clock (0 = navigation start)
      const root = document.querySelector('[data-testid=messages]');
      new MutationObserver(() => {
        const body = root.querySelector('[data-role=assistant] .msg-body');
        if (body?.textContent && !window.__firstToken) window.__firstToken = performance.now();
      }).observe(root, { subtree: true, childList: true, characterData: true });
    });
    await page.getByTestId('load-button').click();
    await page.waitForFunction(() => ['ready', 'idle'].includes(document.querySelector('[data-testid=app]').dataset.status)
      && window.__onnxpipe?.state.status !== 'loading', null, { timeout: 300_000, polling: 10 });
    const failed = await page.evaluate(() => window.__onnxpipe.state.lastError);
    if (failed) throw new Error(`load failed: ${JSON.stringify(failed)}`);
    await page.getByTestId('prompt').fill(QUESTION);
    await page.getByTestId('prompt').press('Enter');
    await page.waitForFunction(() => window.__onnxpipe.state.lastResult || window.__onnxpipe.state.lastError, null, { timeout: 120_000, polling: 20 });
    const error = await page.evaluate(() => window.__onnxpipe.state.lastError);
    if (error) throw new Error(`reply failed: ${JSON.stringify(error)}`);
    return await page.evaluate(() => {
      const ttft = document.querySelector('[data-testid=ttft]');
      const read = (sel, key) => Object.fromEntries([...document.querySelectorAll(sel)].map((e) => [e.dataset[key], Number(e.dataset.ms)]));
      const info = window.__onnxpipe.state.loaded;
      return {
        ttftMs: window.__firstToken,
        pageTotalMs: ttft?.dataset.totalMs ? Number(ttft.dataset.totalMs) : null,
        parts: read('[data-testid=ttft-part]', 'part'),
        stages: read('[data-testid=ttft-stage]', 'stage'),
        snapshot: info.startup?.python_snapshot ?? null,
        threads: `${info.threads}${info.threads_reason ? ` (${info.threads_reason})` : ''}`,
      };
    });
  } finally {
    await page.close();
  }
}

const launch = (profile) => chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });

/** cold, warm x WARM, restart on one fresh profile. */
async function series(server) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-start-'));
  const out = [];
  try {
    let context = await launch(profile);
    out.push({ kind: 'cold', ...(await visit(context, server.url)) });
    for (let i = 0; i < WARM; i++) out.push({ kind: 'warm', ...(await visit(context, server.url)) });
    await context.close();
    context = await launch(profile);
    out.push({ kind: 'restart', ...(await visit(context, server.url)) });
    await context.close();
  } finally {
    fs.rmSync(profile, { recursive: true, force: true });
  }
  return out;
}

const fmt = (ms) => (ms == null ? '-' : `${(ms / 1000).toFixed(2)} s`);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
};

async function main() {
  const dist = DIST_ARG ? path.resolve(ROOT, DIST_ARG) : ensureSite({ log: (m) => process.stderr.write(m) });
  const builds = [['current', dist], ...(BASELINE ? [['baseline', path.resolve(ROOT, BASELINE)]] : [])];
  const servers = {};
  for (const [name, dir] of builds) {
    if (!fs.existsSync(path.join(dir, 'index.html'))) throw new Error(`${dir}: no index.html (run make web)`);
    servers[name] = await startServer({ root: dir });
  }
  const results = Object.fromEntries(builds.map(([name]) => [name, []]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name] of builds) {   // in turns, so both see the same machine load
        for (const r of await series(servers[name])) {
          results[name].push(r);
          const parts = Object.entries(r.parts).map(([k, v]) => `${k} ${fmt(v)}`).join(', ');
          const stages = Object.entries(r.stages).map(([k, v]) => `${k} ${fmt(v)}`).join(', ');
          log(`# ${name.padEnd(8)} ${r.kind.padEnd(7)} first token ${fmt(r.ttftMs)}  threads ${r.threads}` +
            (r.snapshot ? `  python ${r.snapshot}` : '') + (parts ? `\n#   parts: ${parts}\n#   stages: ${stages}` : ''));
        }
      }
    }
  } finally {
    for (const s of Object.values(servers)) await s.stop();
  }
  const summary = {};
  for (const [name] of builds) {
    summary[name] = Object.fromEntries(['cold', 'warm', 'restart'].map((kind) =>
      [kind, median(results[name].filter((r) => r.kind === kind).map((r) => r.ttftMs))]));
  }
  if (JSON_OUT) {
    process.stdout.write(`${JSON.stringify({ summary, results }, null, 1)}\n`);
    return;
  }
  console.log(`time to first token on the chat page (${BUNDLE}, WASM; median of ${ROUNDS} round(s); target: warm <= 3 s)`);
  for (const kind of ['cold', 'warm', 'restart']) {
    const cur = summary.current[kind];
    const base = summary.baseline?.[kind];
    console.log(`  ${kind.padEnd(8)} ${fmt(cur)}` + (base ? `   baseline ${fmt(base)}   ratio baseline/current ${(base / cur).toFixed(2)}x` : ''));
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
