#!/usr/bin/env node
// Speak -> first audio on the built speech page (web/tts.html), headless Chromium, WASM.
//
//   node bench/browser/tts_first_audio.mjs [--dist dist] [--bundle piper-en-us-joe] [--runs 3]
//        [--text PARAGRAPH] [--set NAME=VALUE]... [--models DIR] [--json]
//
// Loads the voice through the page's UI (threads as the page picks them: 2 where cross-origin
// isolated), then presses Speak --runs times on the same paragraph. Per run: milliseconds from
// the click to the first sentence's audio reaching the page (a DOM observer on the sentence list:
// works on builds without the figure too), the page's own "first audio" figure (arrival plus the
// player's lead; null on builds that lack it), the pieces spoken and the real-time factor.
// --models serves another models folder at /models/ (e.g. a bundle as an older build had it).
// Prints the median run (and every run with --json). A benchmark: it never fails on speed.
import path from 'node:path';
import fs from 'node:fs';
import os from 'node:os';
import { ROOT, launchPersistent, startServer } from '../../tests/e2e/lib/browser.mjs';

export const PARAGRAPH = 'When the storm finally passed over the valley, the villagers came out of their houses ' +
  'to look at the damage. Most of the roofs had held. The old bridge, however, was gone, and the river ' +
  'ran high and brown under the grey sky. Nobody spoke for a while.';

function parseArgs(argv) {
  const a = { dist: 'dist', bundle: 'piper-en-us-joe', runs: 3, text: PARAGRAPH, controls: {}, models: undefined, json: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--dist') a.dist = value();
    else if (arg === '--bundle') a.bundle = value();
    else if (arg === '--models') a.models = path.resolve(value());
    else if (arg === '--runs') a.runs = Number(value());
    else if (arg === '--text') a.text = value();
    else if (arg === '--set') {
      const m = /^([\w.]+)=(.+)$/.exec(value());
      if (!m) throw new Error('--set: expected NAME=VALUE');
      a.controls[m[1]] = m[2];
    } else if (arg === '--json') a.json = true;
    else throw new Error(`unknown option ${arg}`);
  }
  if (!(Number.isInteger(a.runs) && a.runs > 0)) throw new Error('--runs wants a positive integer');
  if (!fs.existsSync(path.resolve(ROOT, a.dist, 'tts.html'))) throw new Error(`${a.dist}/tts.html missing: build the site`);
  return a;
}

async function speakOnce(page, text) {
  await page.getByTestId('tts-text').fill(text);
  await page.evaluate(() => {
    const list = document.querySelector('[data-testid=tts-sentences]');
    window.__bench = { t0: null, first: null };
    new MutationObserver((_, observer) => {
      if (list.children.length > 0 && window.__bench.first === null) {
        window.__bench.first = performance.now();
        observer.disconnect();
      }
    }).observe(list, { childList: true });
    document.querySelector('[data-testid=tts-speak]').addEventListener('click', () => {
      window.__bench.t0 = performance.now();
    }, { capture: true, once: true });
  });
  await page.getByTestId('tts-speak').click();
  await page.waitForFunction(() => window.__onnxpipeTts.state.status === 'ready'
    && ['done', 'cancelled', 'failed'].includes(document.querySelector('[data-testid=tts-status]').dataset.state),
  null, { timeout: 300_000, polling: 50 });
  return page.evaluate(() => {
    const s = window.__onnxpipeTts.state;
    const figure = document.querySelector('[data-testid=tts-first-audio]')?.dataset.ms;
    return {
      arrival_ms: window.__bench.first - window.__bench.t0,
      page_first_audio_ms: figure === undefined ? null : Number(figure),
      pieces: s.sentences.map((x) => x.text),
      first_piece_audio_s: s.sentences[0]?.audio_seconds,
      rtf: s.lastResult?.real_time_factor, audio_seconds: s.lastResult?.audio_seconds,
      error: s.lastError,
    };
  });
}

export async function measure({ dist, bundle, runs, text, controls, models }) {
  const server = await startServer({ root: path.resolve(ROOT, dist), models });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'onnxpipe-bench-tts-'));
  const v = await launchPersistent(profile);
  try {
    const page = await v.context.newPage();
    await page.goto(`${server.url}tts.html`);
    await page.waitForFunction(() => Boolean(window.__onnxpipeTts?.controller)
      && document.querySelector('[data-testid=bundle-select] option'), null, { timeout: 60_000 });
    await page.getByTestId('bundle-select').selectOption(bundle);
    await page.getByTestId('ep-select').selectOption('wasm');
    await page.getByTestId('load-button').click();
    await page.waitForFunction(() => ['ready', 'idle'].includes(window.__onnxpipeTts.state.status),
      null, { timeout: 300_000, polling: 100 }).catch((e) => {
      throw new Error(`${e.message}\n${v.logs.slice(-30).join('\n')}`);
    });
    const loaded = await page.evaluate(() => ({ error: window.__onnxpipeTts.state.lastError,
      threads: window.__onnxpipeTts.state.threads, loadMs: window.__onnxpipeTts.state.loaded?.load_ms,
      warmUpMs: window.__onnxpipeTts.state.loaded?.warm_up_ms }));
    if (loaded.error) throw new Error(`load failed: ${JSON.stringify(loaded.error)}`);
    for (const [name, value] of Object.entries(controls)) {
      await page.getByTestId(`tts-control-${name}`).fill(String(value));
    }
    const all = [];
    for (let i = 0; i < runs; i++) {
      const run = await speakOnce(page, text);
      if (run.error) throw new Error(`speak failed: ${JSON.stringify(run.error)}`);
      all.push(run);
    }
    const sorted = [...all].sort((x, y) => x.arrival_ms - y.arrival_ms);
    return { median: sorted[Math.floor(sorted.length / 2)], runs: all, threads: loaded.threads, load_ms: loaded.load_ms,
      warm_up_ms: loaded.warm_up_ms };
  } finally {
    await v.context.close();
    await server.stop();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = parseArgs(process.argv.slice(2));
  const out = await measure(args);
  if (args.json) console.log(JSON.stringify(out));
  else {
    const m = out.median;
    console.log(`${args.bundle} (${args.dist}, ${out.threads} threads): Speak -> first audio ${Math.round(m.arrival_ms)} ms ` +
      `(page figure ${m.page_first_audio_ms ?? '-'} ms); first piece "${m.pieces[0]}" ${m.first_piece_audio_s?.toFixed(2)} s; ` +
      `${m.pieces.length} pieces, ${m.audio_seconds?.toFixed(2)} s audio at ${m.rtf?.toFixed(2)}x real time`);
  }
}
