#!/usr/bin/env node
// One-pass sessions (voice files) run bare on onnxruntime-web (WASM) in headless Chromium.
//
//   node bench/browser/bare_session.mjs DIR FEEDS.json FILE[,FILE...] [--threads 1,2] [--rounds 3]
//        [--output NAME] [--ort ort.wasm.min.mjs] [--chromium /usr/bin/chromium]
//
// Serves DIR (the files) and FEEDS.json (a list of feed sets: {input: {type, dims, data}}) on
// 127.0.0.1 with COOP/COEP; for each thread count, a fresh browser opens bare_session.html,
// which creates a session per file and runs the files interleaved, --rounds times over every
// feed set. Prints JSON: {threads: {files: {FILE: {ms, samples, runs_ms, load_ms}}}} per count.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");

function parseArgs(argv) {
  const o = { threads: "1,2", rounds: 3, output: "", ort: "ort.wasm.min.mjs", chromium: process.env.CHROMIUM || "/usr/bin/chromium" };
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i]; };
    if (a === "--threads") o.threads = next();
    else if (a === "--rounds") o.rounds = Number(next());
    else if (a === "--output") o.output = next();
    else if (a === "--ort") o.ort = next();
    else if (a === "--chromium") o.chromium = next();
    else if (a.startsWith("--")) throw new Error(`unknown option ${a}`);
    else pos.push(a);
  }
  if (pos.length !== 3) throw new Error("usage: bare_session.mjs DIR FEEDS.json FILE[,FILE...] [--threads 1,2] [--rounds 3]");
  [o.dir, o.feeds, o.files] = pos;
  o.files = o.files.split(",").filter(Boolean);
  for (const f of o.files) if (!existsSync(path.join(o.dir, f))) throw new Error(`no ${f} in ${o.dir}`);
  if (!existsSync(o.feeds)) throw new Error(`no feeds file ${o.feeds}`);
  if (!(Number.isInteger(o.rounds) && o.rounds > 0)) throw new Error("--rounds wants a positive integer");
  return o;
}

function startServer(modelDir) {
  const python = process.env.PYTHON || (existsSync(path.join(root, ".venv/bin/python")) ? path.join(root, ".venv/bin/python") : "python3");
  const proc = spawn(python, [path.join(here, "serve.py"), "--port", "0",
    "--mount", `/ort=${path.join(root, "node_modules/onnxruntime-web/dist")}`,
    "--mount", `/model=${modelDir}`, "--mount", `/bench=${here}`], { stdio: ["ignore", "pipe", "inherit"] });
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

async function runPage(o, port, threads) {
  const profile = mkdtempSync(path.join(tmpdir(), "onnxpipe-bare-session-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: o.chromium, headless: true,
      args: ["--headless=new", "--no-sandbox", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    await context.route("**/*", (route) => (new URL(route.request().url()).hostname === "127.0.0.1" ? route.continue() : route.abort()));
    const page = context.pages()[0] || await context.newPage();
    page.on("pageerror", (e) => process.stderr.write(`[page] ${e}\n`));
    const query = new URLSearchParams({ files: o.files.join(","), threads: String(threads), rounds: String(o.rounds), ort: o.ort, output: o.output });
    await page.goto(`http://127.0.0.1:${port}/bench/bare_session.html?${query}`);
    await page.waitForFunction(() => window.__result || window.__error, null, { timeout: 1_200_000, polling: 250 });
    const error = await page.evaluate(() => window.__error);
    if (error) throw new Error(`page: ${error}`);
    return await page.evaluate(() => window.__result);
  } finally {
    if (context) await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  // one folder with the files and feeds.json side by side (links, nothing copied but the feeds)
  const dir = mkdtempSync(path.join(tmpdir(), "onnxpipe-bare-session-files-"));
  for (const f of o.files) symlinkSync(path.resolve(o.dir, f), path.join(dir, f));
  copyFileSync(o.feeds, path.join(dir, "feeds.json"));
  const { proc, port } = await startServer(dir);
  try {
    const out = {};
    for (const t of o.threads.split(",").filter(Boolean).map(Number)) out[t] = await runPage(o, port, t);
    console.log(JSON.stringify(out));
  } finally {
    proc.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(String(e && e.message || e)); process.exit(1); });
