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

// The page asks for what it loaded before this worker controlled it.
self.addEventListener('message', (event) => {
  if (event.data?.type !== 'cache-urls') return;
  event.waitUntil(caches.open(SITE_CACHE).then(async (cache) => {
    for (const url of event.data.urls) {
      if (!(await cache.match(url))) await cache.add(url).catch(() => undefined);
    }
  }));
});
