#!/usr/bin/env node
// Soak in the browser: chat, speech and transcription generations mixed through the REAL
// runtime worker in headless Chromium, each worker's wasm heaps and JS heap (after a forced GC;
// tests/e2e/lib/memory.mjs) sampled every EVERY generations; prints progress, then start, end
// and max per worker and the growth rule of growth.mjs. Exits 1 when memory grew beyond it.
//
//   node tests/soak/soak_browser.mjs [--generations 1000] [--every 50] [--mix cst] [--json]
//        [--chat DIR] [--voice DIR] [--asr DIR]
//
// One worker per bundle, not one worker for all three: a worker holds one bundle at a time
// (py/onnxpipe/web_entry.py keeps one Pipeline; client.load starts a fresh worker for every load
// after the first, so the old bundle's memory goes with it). Switching bundles in one worker
// would soak the load path, not generation. So each bundle gets its own page (its own
// RuntimeClient and worker, served from its own origin so its worker is told apart), and the
// generations interleave across them in the --mix pattern (c chat, s speech, t transcription).
// Two generations of each kind run first (warm-up: onnxruntime's arenas settle on a session's
// second run); the first sample is taken after them.
import path from 'node:path';
import { ROOT, launchBrowser, startServer } from '../e2e/lib/browser.mjs';
import { memoryProbe } from '../e2e/lib/memory.mjs';
import { ensureManifest, generate, loadBundle, openRuntimePage, speak, transcribe } from '../e2e/lib/runtime.mjs';
import { growth } from './growth.mjs';

const MODELS = path.join(ROOT, 'public', 'models');
export const BUNDLES = {
  chat: path.join(MODELS, 'smollm2-135m-instruct'),
  speech: path.join(MODELS, 'piper-en-us-joe'),
  transcription: path.join(MODELS, 'whisper-base'),
};
const KINDS = { c: 'chat', s: 'speech', t: 'transcription' };
const QUESTIONS = ['What is the capital of France?', 'Name a color.', 'Say hello.', 'What is two plus two?'];
const SENTENCES = ['It is cold outside.', 'Close the window, please.', 'The kettle is on.'];
const HEARD = 'The quick brown fox jumps over the lazy dog.';
const WARM_UP = 2;
const TOKENS = 8;

/** One page per bundle, loaded (wasm, 1 thread: the soak is about memory, not speed). */
async function openWorkers(site, browser, context, bundles) {
  const workers = {};
  for (const [kind, dir] of Object.entries(bundles)) {
    ensureManifest(dir);
    const name = path.basename(dir);
    const server = await startServer({ root: site, mounts: { [`/models/${name}/`]: dir } });
    const page = await openRuntimePage(context, server.url);
    const { info } = await loadBundle(page, `${server.url}models/${name}/`, { ep: 'wasm', threads: 1 });
    if (info.kind !== { chat: 'text', speech: 'speech', transcription: 'transcription' }[kind]) {
      throw new Error(`--${kind === 'speech' ? 'voice' : kind === 'transcription' ? 'asr' : 'chat'} ${dir}: a "${info.kind}" bundle`);
    }
    workers[kind] = { server, page, info, probe: await memoryProbe(browser, page, server.url) };
  }
  return workers;
}

/** The n-th generation of ``kind`` on its worker. */
async function runKind(workers, kind, n, heard) {
  const w = workers[kind];
  if (kind === 'chat') {
    const question = QUESTIONS[n % QUESTIONS.length];
    // a chat template's bundle gets a fresh one-message conversation; a bare model the prompt
    const request = w.info.has_chat_template ? { messages: [{ role: 'user', content: question }] } : { prompt: question };
    await generate(w.page, { ...request, options: { do_sample: false, max_new_tokens: TOKENS } });
  } else if (kind === 'speech') {
    await speak(w.page, { text: SENTENCES[n % SENTENCES.length] });
  } else {
    await transcribe(w.page, heard.samples, heard.rate, { max_new_tokens: 2 * TOKENS });
  }
}

/**
 * Run the soak; resolves to {generations, every, counts, seconds, workers: {kind: {samples,
 * wasm_bytes: growth, js_heap_bytes: growth}}, ok}. The browser and servers are closed after.
 */
export async function browserSoak({ site, generations = 1000, every = 50, mix = 'cst', bundles = BUNDLES, log = () => {} }) {
  if (!mix || [...mix].some((c) => !(c in KINDS))) throw new Error(`--mix: expected letters c (chat), s (speech), t (transcription), found "${mix}"`);
  const { browser, context, offsite } = await launchBrowser();
  let workers = {};
  try {
    workers = await openWorkers(site, browser, context, bundles);
    const spoken = await speak(workers.speech.page, { text: HEARD, controls: { noise_scale: 0 } });
    const heard = { samples: spoken.samples, rate: spoken.result.sample_rate };
    for (let n = 0; n < WARM_UP; n++) for (const kind of Object.values(KINDS)) await runKind(workers, kind, n, heard);
    const samples = Object.fromEntries(Object.keys(workers).map((k) => [k, []]));
    const sampleAll = async () => {
      for (const [kind, w] of Object.entries(workers)) samples[kind].push(await w.probe.sample());
    };
    await sampleAll();
    const counts = { chat: 0, speech: 0, transcription: 0 };
    const t0 = performance.now();
    for (let i = 0; i < generations; i++) {
      const kind = KINDS[mix[i % mix.length]];
      await runKind(workers, kind, Math.floor(i / mix.length), heard);
      counts[kind]++;
      if ((i + 1) % every === 0) {
        await sampleAll();
        const mib = (b) => (b / 2 ** 20).toFixed(1);
        log(`# ${i + 1}/${generations} (${((performance.now() - t0) / 1000).toFixed(0)} s): ` +
          Object.entries(samples).map(([k, s]) => `${k} wasm ${mib(s.at(-1).wasm_bytes)} js ${mib(s.at(-1).js_heap_bytes)} MiB`).join('; '));
      }
    }
    if (offsite.length) throw new Error(`requests left 127.0.0.1: ${offsite.join(', ')}`);
    const report = {};
    for (const [kind, s] of Object.entries(samples)) {
      report[kind] = {
        samples: s.length,
        wasm_bytes: growth(s.map((x) => x.wasm_bytes), 'wasm_bytes'),
        js_heap_bytes: growth(s.map((x) => x.js_heap_bytes), 'js_heap_bytes'),
      };
    }
    const ok = Object.values(report).every((r) => r.wasm_bytes.ok && r.js_heap_bytes.ok);
    return { generations, every, mix, counts, seconds: (performance.now() - t0) / 1000, workers: report, ok };
  } finally {
    for (const w of Object.values(workers)) await w.probe.close();
    await browser.close().catch(() => {});
    for (const w of Object.values(workers)) await w.server.stop();
  }
}

/** One line per worker and measure: start, end, max, growth against its limit. */
export function describe(out) {
  const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const lines = [];
  for (const [kind, r] of Object.entries(out.workers)) {
    for (const key of ['wasm_bytes', 'js_heap_bytes']) {
      const g = r[key];
      lines.push(`${kind} worker ${key.replace('_bytes', '')}: start ${mib(g.first)}, end ${mib(g.last)}, max ${mib(g.max)}; ` +
        `tail - baseline ${g.growth >= 0 ? '+' : ''}${mib(g.growth)} (limit ${mib(g.limit)}): ${g.ok ? 'within noise' : 'GREW'}`);
    }
  }
  return lines;
}

async function main(argv) {
  const opt = (name, dflt) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : dflt;
  };
  const int = (name, dflt) => {
    const n = Number(opt(name, dflt));
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} wants a positive integer`);
    return n;
  };
  const { ensureSite } = await import('../e2e/lib/runtime.mjs');
  const out = await browserSoak({
    site: ensureSite(),
    generations: int('--generations', 1000),
    every: int('--every', 50),
    mix: opt('--mix', 'cst'),
    bundles: { chat: path.resolve(opt('--chat', BUNDLES.chat)), speech: path.resolve(opt('--voice', BUNDLES.speech)), transcription: path.resolve(opt('--asr', BUNDLES.transcription)) },
    log: (m) => process.stderr.write(`${m}\n`),
  });
  if (argv.includes('--json')) console.log(JSON.stringify(out));
  for (const line of describe(out)) process.stderr.write(`${line}\n`);
  return out.ok ? 0 : 1;
}

if (process.argv[1]?.endsWith('soak_browser.mjs')) {
  main(process.argv.slice(2)).then((code) => process.exit(code), (error) => {
    process.stderr.write(`soak_browser: ${error.message}\n`);
    process.exit(2);
  });
}
