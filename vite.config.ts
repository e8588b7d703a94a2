// Vite config: the dev server, `vite build` (dist/) and `vite preview` serve one layout
// (docs/browser-runtime.md):
//   /                 web/index.html (+ web/src, workers/ bundled as module workers)
//   /pyodide/*        Pyodide runtime from node_modules/pyodide + build/pyodide/pyodide-lock.json
//                     + the onnxpipe wheel (tools/build_pyodide_lock.py)
//   /models/<bundle>/ public/models/<bundle>/ (served in place; never copied into dist/)
// with COOP/COEP and the site's CSP (tools/csp.json) everywhere and .wasm as application/wasm. tools/serve.py serves dist/ the same way.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Connect, Plugin, PreviewServer, ViteDevServer } from 'vite';
import { defineConfig } from 'vite';
import { pwaPlugins } from './tools/pwa.ts';

const ROOT = path.dirname(fileURLToPath(import.meta.url));
const PUBLIC_DIR = path.join(ROOT, 'public');
const MODELS_DIR = path.join(PUBLIC_DIR, 'models');
const PYODIDE_NPM = path.join(ROOT, 'node_modules', 'pyodide');
const PYODIDE_BUILD = path.join(ROOT, 'build', 'pyodide');
// the browser phonemizer (workers/phonemizer.ts) imports /espeak-ng/espeak-ng.js, which loads
// espeak-ng.data from next to itself; GPL-3.0, so its COPYING travels with it
const ESPEAK_NPM = path.join(ROOT, 'node_modules', '@echogarden', 'espeak-ng-emscripten');
const ESPEAK_FILES = ['espeak-ng.js', 'espeak-ng.data', 'COPYING'];
const espeakFiles = () =>
  new Map(ESPEAK_FILES.map((name) => [name, path.join(ESPEAK_NPM, name)] as const).filter(([, p]) => fs.existsSync(p)));

/** The Content-Security-Policy tools/serve.py sends too, from the same tools/csp.json
 * (docs/security.md); ``frameAncestors``: 'self' for the site, the allow-list for embed.html.
 * ``dev``: the dev server injects imported CSS as <style> elements, so it allows inline styles. */
export function contentSecurityPolicy(frameAncestors = "'self'", dev = false): string {
  const { policy } = JSON.parse(fs.readFileSync(path.join(ROOT, 'tools', 'csp.json'), 'utf8')) as { policy: Record<string, string[]> };
  if (dev) policy['style-src'] = [...policy['style-src'], "'unsafe-inline'"];
  return [...Object.entries(policy).map(([name, sources]) => [name, ...sources].join(' ')), `frame-ancestors ${frameAncestors}`].join('; ');
}

export const CROSS_ORIGIN_HEADERS: Record<string, string> = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Content-Security-Policy': contentSecurityPolicy(),
};

const MIME: Record<string, string> = {
  '.wasm': 'application/wasm',
  '.mjs': 'text/javascript',
  '.js': 'text/javascript',
  '.json': 'application/json',
  '.map': 'application/json',
  '.zip': 'application/zip',
  '.whl': 'application/zip',
  '.onnx': 'application/octet-stream',
  '.data': 'application/octet-stream',
  '.bin': 'application/octet-stream',
  '.txt': 'text/plain; charset=utf-8',
  '.jinja': 'text/plain; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

// Files of the npm pyodide package that are not part of the runtime we serve.
const PYODIDE_SKIP = new Set(['package.json', 'README.md', 'pyodide-lock.json', 'console.html', 'console-v2.html']);

/** Runtime files served under /pyodide/: name -> absolute path. Ours win over the stock lockfile. */
function pyodideFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const name of fs.readdirSync(PYODIDE_NPM)) {
    if (PYODIDE_SKIP.has(name) || name.endsWith('.d.ts')) continue;
    const p = path.join(PYODIDE_NPM, name);
    if (fs.statSync(p).isFile()) files.set(name, p);
  }
  if (fs.existsSync(PYODIDE_BUILD)) {
    for (const name of fs.readdirSync(PYODIDE_BUILD)) {
      if (name === 'pyodide-lock.json' || name.endsWith('.whl')) files.set(name, path.join(PYODIDE_BUILD, name));
    }
  }
  return files;
}

function python(): string {
  if (process.env.PYTHON) return process.env.PYTHON;
  const venv = path.join(ROOT, '.venv', 'bin', 'python');
  return fs.existsSync(venv) ? venv : 'python3';
}

/** (Re)build the wheel + lockfile; a no-op in ~50 ms when py/ is unchanged. */
function buildPyodideLock(): void {
  if (process.env.ONNXPIPE_SKIP_PYODIDE_LOCK === '1') return;
  execFileSync(python(), [path.join(ROOT, 'tools', 'build_pyodide_lock.py')], { cwd: ROOT, stdio: 'inherit' });
}

/** One `Range: bytes=...` header against a file of ``size`` bytes (single ranges only, as
 * tools/http_range.py): [first, last] inclusive, null for the whole file, 'unsatisfiable' for 416. */
function byteRange(header: string | undefined, size: number): [number, number] | null | 'unsatisfiable' {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header?.trim() ?? '');
  if (!m || (!m[1] && !m[2])) return null;
  if (!m[1]) {
    const suffix = Number(m[2]);
    return suffix === 0 || size === 0 ? 'unsatisfiable' : [Math.max(0, size - suffix), size - 1];
  }
  const first = Number(m[1]);
  if (m[2] && Number(m[2]) < first) return null;
  if (first >= size) return 'unsatisfiable';
  return [first, Math.min(m[2] ? Number(m[2]) : size - 1, size - 1)];
}

function sendFile(res: import('node:http').ServerResponse, file: string, range?: string, head = false): void {
  const st = fs.statSync(file);
  for (const [k, v] of Object.entries(CROSS_ORIGIN_HEADERS)) res.setHeader(k, v);
  res.setHeader('Content-Type', MIME[path.extname(file)] ?? 'application/octet-stream');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('Accept-Ranges', 'bytes');   // resumable model downloads (workers/storage/download.ts)
  const wanted = byteRange(range, st.size);
  if (wanted === 'unsatisfiable') {
    res.statusCode = 416;
    res.setHeader('Content-Range', `bytes */${st.size}`);
    res.end();
    return;
  }
  const [first, last] = wanted ?? [0, st.size - 1];
  res.statusCode = wanted ? 206 : 200;
  if (wanted) res.setHeader('Content-Range', `bytes ${first}-${last}/${st.size}`);
  res.setHeader('Content-Length', String(Math.max(0, last - first + 1)));
  if (head || st.size === 0) res.end();
  else fs.createReadStream(file, { start: first, end: last }).pipe(res);
}

/** Serve a directory under a URL prefix (GET/HEAD only; no listing; single byte ranges). */
function serveDir(prefix: string, dir: string | (() => Map<string, string>)): Connect.NextHandleFunction {
  return (req, res, next) => {
    const url = (req.url ?? '').split('?')[0];
    if (!url.startsWith(prefix) || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
    let rel: string;
    try {
      rel = decodeURIComponent(url.slice(prefix.length));
    } catch {
      return next();
    }
    const base = typeof dir === 'string' ? dir : dir();
    let file: string | undefined;
    if (typeof base === 'string') {
      const p = path.resolve(base, rel);
      if (p.startsWith(base + path.sep) && fs.existsSync(p) && fs.statSync(p).isFile()) file = p;
    } else {
      file = base.get(rel);
    }
    if (!file) {
      res.statusCode = 404;
      for (const [k, v] of Object.entries(CROSS_ORIGIN_HEADERS)) res.setHeader(k, v);
      res.end(`not found: ${url}`);
      return;
    }
    sendFile(res, file, req.headers.range, req.method === 'HEAD');
  };
}

/** The widget's cross-origin headers, as tools/serve.py sends them (docs/widget.md): widget.js is
 * a module script other sites load (CORS + CORP), embed.html a frame they show (CORP, and the
 * site's CSP with frame-ancestors from ONNXPIPE_FRAME_ANCESTORS, default `*`). Vite's own `headers` would set
 * CORP: same-origin on them afterwards, so these values are pinned. */
function widgetHeaders(dev: boolean): Connect.NextHandleFunction {
  const ancestors = process.env.ONNXPIPE_FRAME_ANCESTORS ?? '*';
  const scripts = new Set(['/widget.js', '/src/widget/widget.ts']);   // built, dev
  return (req, res, next) => {
    const url = (req.url ?? '').split('?')[0];
    const pinned: Record<string, string> | null = scripts.has(url)
      ? { 'access-control-allow-origin': '*', 'cross-origin-resource-policy': 'cross-origin' }
      : url === '/embed.html'
        ? { 'content-security-policy': contentSecurityPolicy(ancestors, dev), 'cross-origin-resource-policy': 'cross-origin' }
        : null;
    if (pinned) {
      const setHeader = res.setHeader.bind(res);
      res.setHeader = (name: string, value: number | string | readonly string[]) =>
        setHeader(name, pinned[name.toLowerCase()] ?? value);
      for (const [k, v] of Object.entries(pinned)) setHeader(k, v);
    }
    next();
  };
}

/** /pyodide/* in dev and preview, dist/pyodide/* in builds; /models/* from public/models always. */
function onnxpipeSite(): Plugin {
  let outDir = path.join(ROOT, 'dist');
  let command: 'build' | 'serve' = 'serve';
  const install = (server: ViteDevServer | PreviewServer, dev: boolean) => {
    server.middlewares.use(widgetHeaders(dev));
    if (!dev) {
      server.middlewares.use(serveDir('/pyodide/', path.join(outDir, 'pyodide')));
    } else {
      // rebuild the wheel when the lockfile is asked for, so a page reload picks up py/ edits
      server.middlewares.use((req, _res, next) => {
        if ((req.url ?? '').split('?')[0] === '/pyodide/pyodide-lock.json') {
          try {
            buildPyodideLock();
          } catch (e) {
            return next(e as Error);
          }
        }
        next();
      });
      server.middlewares.use(serveDir('/pyodide/', pyodideFiles));
    }
    server.middlewares.use(serveDir('/models/', MODELS_DIR));
    server.middlewares.use(serveDir('/espeak-ng/', espeakFiles));
  };
  return {
    name: 'onnxpipe-site',
    configResolved(config) {
      outDir = path.resolve(config.root, config.build.outDir);
      command = config.command;
    },
    buildStart() {
      if (command === 'build') buildPyodideLock();
    },
    configureServer(server) {
      buildPyodideLock();
      install(server, true);
    },
    configurePreviewServer(server) {
      // dist/pyodide/ (with our MIME types) and /models/ from public/models (not in dist/)
      install(server, false);
    },
    writeBundle() {
      // Pyodide runtime + lockfile + wheel
      const dest = path.join(outDir, 'pyodide');
      fs.mkdirSync(dest, { recursive: true });
      const files = pyodideFiles();
      for (const must of ['pyodide-lock.json', 'pyodide.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip']) {
        if (!files.has(must)) throw new Error(`onnxpipe-site: /pyodide/${must} missing (run tools/build_pyodide_lock.py)`);
      }
      if (![...files.keys()].some((n) => n.endsWith('.whl'))) throw new Error('onnxpipe-site: onnxpipe wheel missing');
      for (const [name, src] of files) fs.copyFileSync(src, path.join(dest, name));
      // the browser phonemizer, from node_modules (never committed: GPL-3.0)
      const espeak = espeakFiles();
      if (espeak.size !== ESPEAK_FILES.length) throw new Error(`onnxpipe-site: ${ESPEAK_NPM} is incomplete (run npm install)`);
      fs.mkdirSync(path.join(outDir, 'espeak-ng'), { recursive: true });
      for (const [name, src] of espeak) fs.copyFileSync(src, path.join(outDir, 'espeak-ng', name));
      // public/ without models/ (models are served in place by tools/serve.py and vite preview)
      if (fs.existsSync(PUBLIC_DIR)) {
        fs.cpSync(PUBLIC_DIR, outDir, {
          recursive: true,
          filter: (src) => path.resolve(src) !== MODELS_DIR,
        });
      }
    },
  };
}

// pyodide.mjs imports node:* modules behind an `if (IN_NODE)`; Vite stubs them for the
// browser and says so once per module on every build. They are never loaded in a browser.
type LogHandler = (level: string, log: { message: string; plugin?: string }) => void;
function quietLog(level: string, log: { message: string; plugin?: string }, handler: LogHandler): void {
  if (/Module "node:[^"]+" has been externalized for browser compatibility, imported by "[^"]*pyodide/.test(log.message)) return;
  handler(level, log);
}

export default defineConfig({
  root: path.join(ROOT, 'web'),
  publicDir: PUBLIC_DIR, // dev: /models/... straight from public/models
  // the manifest and the Workbox service worker (tools/pwa.ts); its sw.js is generated after
  // onnxpipe-site's writeBundle, so it precaches the Pyodide and espeak-ng files copied there
  plugins: [onnxpipeSite(), ...pwaPlugins(ROOT)],
  server: {
    host: '127.0.0.1',
    port: 5173,
    headers: { ...CROSS_ORIGIN_HEADERS, 'Content-Security-Policy': contentSecurityPolicy("'self'", true) },
    // workers/ and node_modules/ live outside web/ (node_modules may be a link elsewhere)
    fs: { allow: [ROOT, ...(fs.existsSync(path.join(ROOT, 'node_modules')) ? [fs.realpathSync(path.join(ROOT, 'node_modules'))] : [])] },
  },
  preview: {
    host: '127.0.0.1',
    port: 4173,
    headers: CROSS_ORIGIN_HEADERS,
  },
  optimizeDeps: {
    // pre-bundling either reloads the dev page mid-run or breaks the packages' own file lookups
    exclude: ['pyodide', 'onnxruntime-web'],
  },
  worker: {
    format: 'es',
    rollupOptions: { onLog: quietLog },
  },
  build: {
    outDir: path.join(ROOT, 'dist'),
    emptyOutDir: true,
    copyPublicDir: false, // see writeBundle: public/ is copied without models/
    target: 'es2022',
    assetsInlineLimit: 0, // never inline wasm/onnx as data: URLs
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      onLog: quietLog,
      // the chat (index.html), text to speech (tts.html), the widget's frame (embed.html) and
      // widget.js, the script other sites include (web/src/widget/widget.ts; docs/widget.md)
      input: {
        main: path.join(ROOT, 'web', 'index.html'),
        tts: path.join(ROOT, 'web', 'tts.html'),
        voice: path.join(ROOT, 'web', 'voice.html'),
        transcribe: path.join(ROOT, 'web', 'transcribe.html'),
        library: path.join(ROOT, 'web', 'library.html'),
        embed: path.join(ROOT, 'web', 'embed.html'),
        widget: path.join(ROOT, 'web', 'src', 'widget', 'widget.ts'),
      },
      output: {
        // widget.js at a stable URL at the root (sites link it), the rest content-hashed
        entryFileNames: (chunk) => (chunk.name === 'widget' ? 'widget.js' : 'assets/[name]-[hash].js'),
      },
      // an entry's exports stay as they are (widget.js exports its element classes)
      preserveEntrySignatures: 'exports-only',
    },
  },
});
