// onnxpipe's service worker: keeps the site (page, worker, Pyodide, onnxruntime-web) so a
// second visit works offline. Network first, so a new build is picked up when online; the
// cache answers when the network doesn't. Model files are cached (and verified) by the
// runtime worker itself, in its own cache, so they are left alone here.
const SITE_CACHE = 'onnxpipe-site-v1';

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

async function networkFirst(request) {
  const cache = await caches.open(SITE_CACHE);
  try {
    const response = await fetch(request);
    if (response.ok && response.type === 'basic') await cache.put(request, response.clone());
    return response;
  } catch (error) {
    const cached = await cache.match(request, { ignoreVary: true });
    if (cached) return cached;
    throw error;
  }
}

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin) return;
  if (url.pathname.startsWith('/models/') || url.pathname.startsWith('/@') || url.pathname.startsWith('/node_modules/')) return;
  event.respondWith(networkFirst(event.request));
});

// Keep one URL unless kept already; for an HTML page also the /assets/ its markup names
// (the other page's entry script and styles were never loaded by this one).
async function keep(cache, url) {
  if (await cache.match(url)) return;
  const response = await fetch(url).catch(() => null);
  if (!response || !response.ok || response.type !== 'basic') return;
  if ((response.headers.get('Content-Type') ?? '').startsWith('text/html')) {
    const html = await response.clone().text();
    for (const [, ref] of html.matchAll(/(?:src|href)="([^"]+)"/g)) {
      const asset = new URL(ref, url);
      if (asset.origin === self.location.origin && asset.pathname.startsWith('/assets/')) await keep(cache, asset.href);
    }
  }
  await cache.put(url, response);
}

// The page asks for what it loaded before this worker controlled it, and for both pages.
self.addEventListener('message', (event) => {
  if (event.data?.type !== 'cache-urls') return;
  event.waitUntil(caches.open(SITE_CACHE).then(async (cache) => {
    for (const url of event.data.urls) await keep(cache, url).catch(() => undefined);
  }));
});
