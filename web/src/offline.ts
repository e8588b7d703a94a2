// Offline use and updates: the service worker Workbox generates at build time (tools/pwa.ts)
// precaches the whole site, so a page opens offline once it was visited. A new build never
// takes over silently: it waits until the user presses Reload in the update prompt.
import { registerSW } from 'virtual:pwa-register';
import { UpdatePrompt } from './app/update-prompt';

// a tab left open for days still hears of a new build
const UPDATE_CHECK_MS = 60 * 60 * 1000;

/**
 * Register /sw.js (build only; the dev server has none) and show the update prompt when a new
 * build's worker is waiting. Never throws: offline is a bonus. Nothing needs to wait for the
 * worker: it precaches every file itself at install, whatever the page fetched meanwhile.
 */
export function enableOffline(): void {
  if (!('serviceWorker' in navigator) || import.meta.env.DEV) return;
  const prompt = new UpdatePrompt();
  // update() sends SKIP_WAITING; registerSW reloads the page once the new worker controls it
  const update = registerSW({
    onNeedRefresh: () => prompt.show(() => update()),
    onRegisteredSW: (_url, registration) => {
      if (registration) setInterval(() => void registration.update().catch(() => undefined), UPDATE_CHECK_MS);
    },
    onRegisterError: (error: unknown) => console.warn('onnxpipe: offline support unavailable:', error),
  });
}
