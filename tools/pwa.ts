// The installable app (docs/browser-runtime.md, "Installable app and updates"): the web app
// manifest, the build id shown in the page footer, and the service worker that Workbox
// generates at build time (vite-plugin-pwa, generateSW) with a revisioned precache of the site.
// Used by vite.config.ts: plugins: [..., ...pwaPlugins()].
import { execFileSync } from 'node:child_process';
import type { Plugin } from 'vite';
import { VitePWA } from 'vite-plugin-pwa';

export const THEME_COLOR = '#2f5fd0'; // --accent in web/src/styles.css
export const BACKGROUND_COLOR = '#f6f7f9'; // --bg in web/src/styles.css
/** The cache of the hand-written service worker (public/sw.js) that came before this one. */
export const LEGACY_SITE_CACHE = 'onnxpipe-site-v1';
const CLEANUP_SCRIPT = 'sw-cleanup.js';
/** The runtime cache of models/index.json (the pages' model menus), and the snippet that fills
 * it when the service worker installs. */
export const MODEL_INDEX_CACHE = 'onnxpipe-model-index';
const MODEL_INDEX_SCRIPT = 'sw-model-index.js';
// the largest precached file is onnxruntime-web's asyncify wasm (~27 MB); Workbox skips,
// with only a warning, any file above this, so the limit sits well above it
const MAX_PRECACHE_FILE_BYTES = 64 * 1024 * 1024;

/**
 * The build id the footer shows: ONNXPIPE_BUILD_ID when set (a release name, a CI run), else
 * the git commit and the build time, e.g. "ccd938a 2026-11-22T14:30Z".
 */
export function buildId(root: string): string {
  const given = process.env.ONNXPIPE_BUILD_ID?.trim();
  if (given) return given;
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a git checkout (a source tarball): the time alone still tells builds apart
  }
  return `${commit} ${new Date().toISOString().slice(0, 16)}Z`;
}

/** __ONNXPIPE_BUILD_ID__ for the pages, <meta name="theme-color"> on every page, and the
 * snippets the generated service worker imports: one deletes the old hand-written cache, one
 * caches models/index.json at install (the page's own first fetch of it ran before the worker
 * controlled the page, so without this an offline reload would find no copy). */
function siteMeta(id: string): Plugin {
  return {
    name: 'onnxpipe-pwa-meta',
    config: () => ({ define: { __ONNXPIPE_BUILD_ID__: JSON.stringify(id) } }),
    transformIndexHtml: () => [{ tag: 'meta', attrs: { name: 'theme-color', content: THEME_COLOR }, injectTo: 'head' }],
    generateBundle() {
      this.emitFile({
        type: 'asset',
        fileName: CLEANUP_SCRIPT,
        source: `// onnxpipe: users of the hand-written service worker still hold its cache; drop it.\n` +
          `self.addEventListener('activate', (event) => event.waitUntil(caches.delete(${JSON.stringify(LEGACY_SITE_CACHE)})));\n`,
      });
      this.emitFile({
        type: 'asset',
        fileName: MODEL_INDEX_SCRIPT,
        source: `// onnxpipe: the model menus' list, kept for offline visits (refreshed whenever the server answers).\n` +
          `self.addEventListener('install', (event) => event.waitUntil(caches.open(${JSON.stringify(MODEL_INDEX_CACHE)})\n` +
          `  .then((cache) => cache.add(new Request('models/index.json', { cache: 'no-cache' })))\n` +
          `  .catch(() => undefined)));   // no index.json on this server: the pages offer their default model\n`,
      });
    },
  };
}

export function pwaPlugins(root: string): Plugin[] {
  return [
    siteMeta(buildId(root)),
    ...VitePWA({
      strategies: 'generateSW',
      registerType: 'prompt', // a new build waits until the user says "Reload" (web/src/offline.ts)
      injectRegister: null, // web/src/offline.ts registers through virtual:pwa-register
      filename: 'sw.js', // the old worker's URL: its users get this one as an update
      manifestFilename: 'manifest.webmanifest',
      includeManifestIcons: false, // dist/icons/ is precached by the glob below (no duplicate entries)
      manifest: {
        id: './',
        name: 'onnxpipe',
        short_name: 'onnxpipe',
        description: 'Chat and text to speech with ONNX models, running in your browser, offline once loaded',
        lang: 'en',
        // relative to the manifest's URL, so the app also works under a sub-path
        start_url: './',
        scope: './',
        display: 'standalone',
        theme_color: THEME_COLOR,
        background_color: BACKGROUND_COLOR,
        // tools/make_icons.py draws them (public/icons/)
        icons: [
          { src: 'icons/icon-192.png', sizes: '192x192', type: 'image/png', purpose: 'any' },
          { src: 'icons/icon-512.png', sizes: '512x512', type: 'image/png', purpose: 'any' },
          { src: 'icons/icon-maskable-512.png', sizes: '512x512', type: 'image/png', purpose: 'maskable' },
        ],
      },
      workbox: {
        // Workbox scans dist/ after the whole build was written (closeBundle), so the Pyodide
        // runtime and espeak-ng files that vite.config.ts copies in writeBundle are there
        // (manifest.webmanifest is added by vite-plugin-pwa itself)
        globPatterns: ['**/*.{html,js,mjs,css,wasm,json,zip,whl,png,svg,ico}', 'espeak-ng/*'],
        // models are large and stored by the runtime worker (workers/bundle-loader.ts); never
        // copied into dist/, and kept out here should a folder ever end up there. The two
        // snippets are part of the worker's own script, which the browser keeps with it.
        // embed.html always comes from the server: its frame-ancestors header (the allow-list of
        // sites that may embed the widget, tools/serve.py) must never be a stale precached copy
        globIgnores: ['**/*.map', 'models/**', CLEANUP_SCRIPT, MODEL_INDEX_SCRIPT, 'embed.html'],
        maximumFileSizeToCacheInBytes: MAX_PRECACHE_FILE_BYTES,
        // every precached file is static: a query (/?x, tts.html?y) must not miss it
        ignoreURLParametersMatching: [/.*/],
        // each page (/, /tts.html) is precached itself and answers its own
        // navigations; one fallback document would answer other pages' URLs with the chat page
        navigateFallback: null,
        cleanupOutdatedCaches: true,
        clientsClaim: true, // the first visit is controlled at once; an update takes the page it reloads
        skipWaiting: false, // a new build waits for the prompt's Reload (SKIP_WAITING message)
        importScripts: [CLEANUP_SCRIPT, MODEL_INDEX_SCRIPT],
        // models/index.json (the model menus): from the server when it answers, else the copy
        // kept from the last answer, so an offline page names its models and logs no failed
        // request. Nothing else is cached at run time: a model's own files go to the network
        // and are kept by the runtime worker (workers/storage/).
        runtimeCaching: [{
          urlPattern: ({ url, sameOrigin }) => sameOrigin && url.pathname.endsWith('/models/index.json'),
          handler: 'NetworkFirst',
          options: { cacheName: MODEL_INDEX_CACHE, networkTimeoutSeconds: 5, cacheableResponse: { statuses: [200] } },
        }],
      },
    }),
  ];
}
