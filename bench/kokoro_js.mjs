// kokoro-js 1.2.1 in headless Chromium on the bundle's own weights, for bench/kokoro_rtf.py.
//
//   node bench/kokoro_js.mjs HUB_DIR --text TEXT [--runs 1] [--json]
//
// kokoro-js fetches its model, tokenizer and voice from the Hugging Face hub
// (https://huggingface.co/onnx-community/Kokoro-82M-v1.0-ONNX/resolve/main/...), which this
// machine cannot reach: Chromium resolves huggingface.co to a local HTTPS server (a self-signed
// certificate made with openssl, certificate errors ignored) that answers from HUB_DIR (made by
// bench/kokoro_rtf.py: the bundle's int8 file with kokoro-js's input/output names, a tokenizer
// over vocab.json, the jm_kumo table as voices/af_heart.bin). Playwright's route.fulfill can't
// carry the 92 MB model (the page dies). Any other request not to 127.0.0.1 is refused.
// kokoro-js is installed outside package.json:
//   mkdir -p build/bench-kokoro-js && cd build/bench-kokoro-js && echo '{"private":true}' > package.json \
//     && npm install --ignore-scripts --no-audit --no-fund kokoro-js@1.2.1
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { ROOT, launchBrowser, startServer } from '../tests/e2e/lib/browser.mjs';
import { ensureSite } from '../tests/e2e/lib/runtime.mjs';

const PEER = path.join(ROOT, 'build', 'bench-kokoro-js', 'node_modules');
const HUB = 'https://huggingface.co/onnx-community/Kokoro-82M-v1.0-ONNX/resolve/main/';

function parse(argv) {
  const a = { runs: 1, json: false };
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--text') a.text = argv[++i];
    else if (arg === '--runs') a.runs = Number(argv[++i]);
    else if (arg === '--json') a.json = true;
    else pos.push(arg);
  }
  if (pos.length !== 1 || !a.text) throw new Error('usage: node bench/kokoro_js.mjs HUB_DIR --text TEXT [--runs N] [--json]');
  a.hub = path.resolve(pos[0]);
  return a;
}

/** A local HTTPS server answering the hub's URLs from ``hub``; resolves to {port, close}. */
async function hubServer(hub, served) {
  const tls = path.join(ROOT, 'build', 'bench', 'kokoro-js-tls');
  if (!fs.existsSync(path.join(tls, 'cert.pem'))) {
    fs.mkdirSync(tls, { recursive: true });
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '30', '-subj', '/CN=huggingface.co',
      '-keyout', path.join(tls, 'key.pem'), '-out', path.join(tls, 'cert.pem')], { stdio: 'ignore' });
  }
  const server = https.createServer({ key: fs.readFileSync(path.join(tls, 'key.pem')), cert: fs.readFileSync(path.join(tls, 'cert.pem')) },
    (req, res) => {
      const headers = { 'access-control-allow-origin': '*', 'cross-origin-resource-policy': 'cross-origin' };
      const rel = decodeURIComponent(new URL(req.url, 'https://huggingface.co').pathname.split('/resolve/main/')[1] ?? '');
      const file = path.join(hub, rel);
      if (!rel || !file.startsWith(hub + path.sep) || !fs.existsSync(file)) {
        res.writeHead(404, headers).end('not here');
        return;
      }
      served.push(rel);
      res.writeHead(200, { ...headers, 'content-length': fs.statSync(file).size });
      fs.createReadStream(file).pipe(res);
    });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: server.address().port, close: () => new Promise((resolve) => server.close(resolve)) };
}

async function main() {
  const a = parse(process.argv.slice(2));
  const kokoro = path.join(PEER, 'kokoro-js', 'dist');
  if (!fs.existsSync(path.join(kokoro, 'kokoro.web.js'))) throw new Error(`kokoro-js is not installed in ${PEER} (see this file's header)`);
  const version = JSON.parse(fs.readFileSync(path.join(PEER, 'kokoro-js', 'package.json'))).version;
  // kokoro_js.html is an inline-script page of another runtime, fetching from the hub server
  const server = await startServer({ root: ensureSite(), csp: false, mounts: { '/bench/': path.join(ROOT, 'bench'),
    '/kokoro-js/': kokoro, '/tjs-dist/': path.join(PEER, '@huggingface', 'transformers', 'dist') } });
  const served = [];
  const hubHttps = await hubServer(a.hub, served);
  const { browser, context, offsite, logs } = await launchBrowser({
    args: [`--host-resolver-rules=MAP huggingface.co 127.0.0.1:${hubHttps.port}`, '--ignore-certificate-errors'] });
  // registered after the guard, so the hub's URLs go on (to the local server) instead of being refused
  await context.route(`${HUB}**`, (route) => route.continue());
  try {
    const page = await context.newPage();
    const q = new URLSearchParams({ text: a.text, voice: 'af_heart', runs: String(a.runs) });
    await page.goto(`${server.url}bench/browser/kokoro_js.html?${q}`);
    await page.waitForFunction(() => window.__result, null, { timeout: 600_000, polling: 200 });
    const result = await page.evaluate(() => window.__result);
    if (result.error) throw new Error(`${result.error}\n${logs.slice(-20).join('\n')}`);
    const best = result.runs.reduce((b, r) => (r.compute_seconds < b.compute_seconds ? r : b));
    const out = { version, ...best, rtf: best.audio_seconds / best.compute_seconds, load_ms: result.load_ms,
      isolated: result.isolated, hardware_concurrency: result.hardware_concurrency, served: [...new Set(served)],
      offsite: offsite.filter((u) => !u.startsWith(HUB)) };
    if (a.json) console.log(JSON.stringify(out));
    else console.log(`kokoro-js ${version}: ${best.audio_seconds.toFixed(2)} s of audio in ${best.compute_seconds.toFixed(2)} s (${out.rtf.toFixed(2)}x real time)`);
  } catch (error) {
    if (process.env.ONNXPIPE_E2E_VERBOSE) process.stderr.write(`${logs.join('\n')}\n`);
    throw error;
  } finally {
    await browser.close();
    await server.stop();
    await hubHttps.close();
  }
}

main().catch((error) => {
  process.stderr.write(`kokoro_js: ${error.message}\n`);
  process.exit(1);
});
