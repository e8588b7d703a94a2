#!/usr/bin/env node
// The npm package against today's page, one headless Chromium, side by side (issue 25):
//   package  a fresh Vite app outside the repo that installed build/package/onnxpipe-X.Y.Z.tgz
//            (tests/e2e/lib/consumer-app.mjs): createEngine() -> the first streamed token, cold
//            (a fresh profile) and warm (the same profile's second visit: Python snapshot and
//            model from the device's storage), then decode tokens/s over a greedy reply
//   page     the chat page's RuntimeClient (dist/): load -> the first token, cold and warm,
//            and decode tokens/s over the same reply
// Also the package's size, packed and installed (with and without its `openai` types).
// Not a test; run with nothing else heavy on the machine.
//
//   node bench/package_speed.mjs [--tokens 128]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, launchPersistent, startServer } from '../tests/e2e/lib/browser.mjs';
import { buildConsumerApp, packageTarball } from '../tests/e2e/lib/consumer-app.mjs';
import { ensureSite, generate, loadBundle, openRuntimePage } from '../tests/e2e/lib/runtime.mjs';

const args = process.argv.slice(2);
const at = args.indexOf('--tokens');
const TOKENS = at >= 0 ? Number(args[at + 1]) : 128;
const CHAT = 'smollm2-135m-instruct';
const MESSAGES = [{ role: 'user', content: 'Tell me a long story about a dragon.' }];
const log = (m) => process.stderr.write(`${m}\n`);
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

function du(dir) {
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
}

/** Two visits of ``url`` in one fresh profile; ``visit(context, url)`` measures one. */
async function twoVisits(url, visit) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-bench-profile-'));
  const out = [];
  try {
    for (let i = 0; i < 2; i++) {
      const { context } = await launchPersistent(profile);
      try {
        out.push(await visit(context, url));
      } finally {
        await context.close();
      }
    }
  } finally {
    fs.rmSync(profile, { recursive: true, force: true });
  }
  return out;
}

async function packageVisit(context, url) {
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById('status')?.textContent === 'ready');
  return page.evaluate(([chat, tokens]) => window.runBench({ chat }, { maxTokens: tokens }), [new URL(`/models/${CHAT}/`, url).href, TOKENS]);
}

async function pageVisit(context, url) {
  const t0 = Date.now();
  const page = await openRuntimePage(context, url);
  const opened = Date.now() - t0;
  const load = await loadBundle(page, new URL(`/models/${CHAT}/`, url).href);
  const run = await generate(page, { messages: MESSAGES, options: { do_sample: false, max_new_tokens: TOKENS } });
  const tokens = run.result.tokens.length;
  const first = run.events[0].ms;
  const last = run.events.at(-1).ms;
  return { engineMs: opened + load.wallMs, threads: load.info.threads, firstTokenMs: opened + load.wallMs + run.firstTokenMs, tokens, decodeTokensPerS: (tokens - 1) / ((last - first) / 1000) };
}

async function main() {
  ensureSite({ log });
  if (!packageTarball()) execFileSync('make', ['package'], { cwd: ROOT, stdio: 'inherit' });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-bench-consumer-'));
  const servers = [];
  try {
    log('building the consumer app (npm install of the tarball, vite build)...');
    const app = buildConsumerApp(path.join(work, 'app'));
    const tarball = packageTarball();
    const installed = path.join(app, 'node_modules');
    const sizes = { packed: fs.statSync(tarball).size, installed: du(path.join(installed, 'onnxpipe')), openai: du(path.join(installed, 'openai')) };
    const appServer = await startServer({ root: path.join(app, 'dist'), csp: false });
    const siteServer = await startServer();
    servers.push(appServer, siteServer);
    log('package: two visits...');
    const pkg = await twoVisits(appServer.url, packageVisit);
    log('page: two visits...');
    const site = await twoVisits(siteServer.url, pageVisit);
    const row = (name, [cold, warm]) => `  ${name.padEnd(8)} ${Math.round(cold.engineMs).toString().padStart(6)} / ${Math.round(warm.engineMs).toString().padStart(6)} ms` +
      `   ${Math.round(cold.firstTokenMs).toString().padStart(6)} / ${Math.round(warm.firstTokenMs).toString().padStart(6)} ms` +
      `   ${cold.decodeTokensPerS.toFixed(1).padStart(5)} / ${warm.decodeTokensPerS.toFixed(1).padStart(5)} tokens/s (${cold.tokens} / ${warm.tokens} tokens, ${cold.threads} / ${warm.threads} threads)`;
    console.log(`onnxpipe npm package vs today's page, ${CHAT}, WASM, ${TOKENS} new tokens at most, cold / warm visit`);
    console.log(`  package size: ${mib(sizes.packed)} packed, ${mib(sizes.installed)} installed (+ ${mib(sizes.openai)} for the openai package its types come from)`);
    console.log('           start (createEngine / page load + model load)   first token            decode');
    console.log(row('package', pkg));
    console.log(row('page', site));
    console.log(`  decode, package / page: ${(pkg[0].decodeTokensPerS / site[0].decodeTokensPerS).toFixed(2)} cold, ${(pkg[1].decodeTokensPerS / site[1].decodeTokensPerS).toFixed(2)} warm`);
  } finally {
    for (const server of servers) await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

await main();
