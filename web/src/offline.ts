// Offline use: a service worker keeps the site's own files; the runtime worker keeps models.

/** Register /sw.js and wait (briefly) until it controls the page, so the runtime worker's
 * Pyodide and onnxruntime-web downloads are kept too. Never throws: offline is a bonus. */
export async function enableOffline(timeoutMs = 3000): Promise<void> {
  if (!('serviceWorker' in navigator) || import.meta.env.DEV) return;
  try {
    await navigator.serviceWorker.register('/sw.js');
    await navigator.serviceWorker.ready;
    if (!navigator.serviceWorker.controller) {
      await new Promise<void>((resolve) => {
        navigator.serviceWorker.addEventListener('controllerchange', () => resolve(), { once: true });
        setTimeout(resolve, timeoutMs);
      });
    }
    // both pages (chat and speech), so either opens offline after a visit to the other
    const pages = ['./', 'tts.html'].map((page) => new URL(page, document.baseURI).href);
    const urls = [location.href, ...pages, ...performance.getEntriesByType('resource').map((entry) => entry.name)]
      .filter((url) => new URL(url).origin === location.origin && !new URL(url).pathname.startsWith('/models/'));
    navigator.serviceWorker.controller?.postMessage({ type: 'cache-urls', urls });
  } catch (error) {
    console.warn('onnxpipe: offline support unavailable:', error);
  }
}
