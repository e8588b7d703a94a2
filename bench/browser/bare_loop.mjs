#!/usr/bin/env node
// Decode speed of one ONNX decoder in onnxruntime-web (WASM) inside headless Chromium.
//
//   node bench/browser/bare_loop.mjs MODEL_DIR FILE [--tokens N] [--threads T] [--prompt-ids 1,2,3]
//        [--data a.data,b.data] [--ort ort.wasm.min.mjs] [--eos 2] [--chromium /usr/bin/chromium]
//        [--timeout-s 600]
//
// Serves MODEL_DIR and onnxruntime-web's dist on 127.0.0.1 (COOP/COEP, so threads > 1 work),
// opens bare_loop.html in a fresh headless Chromium with every other request blocked, runs a
// greedy loop (argmax in JS, KV cache fed back as separate past/present tensors) and prints
// JSON: {tokens_per_s, tokens, decode_steps, prefill_ms, load_ms, threads, ...}.
// tokens_per_s counts decode steps only (the prefill step is reported apart).
// --data defaults to FILE.data when that file exists.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");

function parseArgs(argv) {
  const opts = { tokens: 32, threads: 1, promptIds: "1", data: null, ort: "ort.wasm.min.mjs", eos: "",
                 chromium: process.env.CHROMIUM || "/usr/bin/chromium", timeoutS: 600 };
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
    if (a === "--tokens") opts.tokens = Number(next());
    else if (a === "--threads") opts.threads = Number(next());
    else if (a === "--prompt-ids") opts.promptIds = next();
    else if (a === "--data") opts.data = next();
    else if (a === "--ort") opts.ort = next();
    else if (a === "--eos") opts.eos = next();
    else if (a === "--chromium") opts.chromium = next();
    else if (a === "--timeout-s") opts.timeoutS = Number(next());
    else if (a === "-h" || a === "--help") { console.log("usage: node bench/browser/bare_loop.mjs MODEL_DIR FILE [--tokens N] [--threads T] [--prompt-ids 1,2,3] [--data a.data] [--ort ort.wasm.min.mjs]"); process.exit(0); }
    else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else pos.push(a);
  }
  if (pos.length !== 2) throw new Error("usage: bare_loop.mjs MODEL_DIR FILE [options]");
  [opts.modelDir, opts.file] = pos;
  if (!existsSync(path.join(opts.modelDir, opts.file))) throw new Error(`no ${opts.file} in ${opts.modelDir}`);
  if (opts.data === null) opts.data = existsSync(path.join(opts.modelDir, opts.file + ".data")) ? opts.file + ".data" : "";
  return opts;
}

function startServer(modelDir) {
  const python = process.env.PYTHON || (existsSync(path.join(root, ".venv/bin/python")) ? path.join(root, ".venv/bin/python") : "python3");
  const proc = spawn(python, [path.join(here, "serve.py"), "--port", "0",
    "--mount", `/ort=${path.join(root, "node_modules/onnxruntime-web/dist")}`,
    "--mount", `/model=${path.resolve(modelDir)}`,
    "--mount", `/bench=${here}`], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let buf = "";
    proc.stdout.on("data", (chunk) => {
      buf += chunk;
      const m = buf.match(/PORT (\d+)/);
      if (m) resolve({ proc, port: Number(m[1]) });
    });
    proc.on("exit", (code) => reject(new Error(`server exited (${code})`)));
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { proc, port } = await startServer(opts.modelDir);
  const profile = mkdtempSync(path.join(tmpdir(), "onnxpipe-bare-loop-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: opts.chromium,
      headless: true,
      args: ["--headless=new", "--no-sandbox", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    await context.route("**/*", (route) => {
      const host = new URL(route.request().url()).hostname;
      return host === "127.0.0.1" ? route.continue() : route.abort();
    });
    const page = context.pages()[0] || await context.newPage();
    page.on("console", (m) => { if (m.type() === "error") process.stderr.write(`[page] ${m.text()}\n`); });
    page.on("pageerror", (e) => process.stderr.write(`[page] ${e}\n`));
    const query = new URLSearchParams({ file: opts.file, data: opts.data, tokens: String(opts.tokens),
      threads: String(opts.threads), prompt: opts.promptIds, ort: opts.ort, eos: opts.eos });
    await page.goto(`http://127.0.0.1:${port}/bench/bare_loop.html?${query}`);
    await page.waitForFunction(() => window.__result || window.__error, null, { timeout: opts.timeoutS * 1000, polling: 250 });
    const error = await page.evaluate(() => window.__error);
    if (error) throw new Error(`page: ${error}`);
    const result = await page.evaluate(() => window.__result);
    console.log(JSON.stringify({ file: opts.file, ...result }));
  } finally {
    if (context) await context.close().catch(() => {});
    proc.kill();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(String(e && e.message || e)); process.exit(1); });
