// Which model bundles the page offers: /models/index.json when served, else the default one.
// The service worker keeps the last copy the server sent (tools/pwa.ts), so an offline page
// still names its models.

export interface BundleEntry {
  name: string;
  label: string;
  url: string;
  /** What the bundle does, when index.json says: the chat lists text bundles, the speech page speech ones. */
  kind?: 'text' | 'speech';
}

export const DEFAULT_BUNDLE = 'smollm2-135m-instruct';

/** Bundle folders are resolved against the page, so the app also works under a sub-path. */
export function bundleUrl(name: string): string {
  return new URL(`models/${encodeURIComponent(name)}/`, document.baseURI).href;
}

function entry(raw: unknown): BundleEntry | null {
  if (typeof raw === 'string' && raw) return { name: raw, label: raw, url: bundleUrl(raw) };
  if (typeof raw !== 'object' || raw === null) return null;
  const item = raw as Record<string, unknown>;
  if (typeof item.name !== 'string' || !item.name) return null;
  const url = typeof item.url === 'string' ? new URL(item.url, document.baseURI).href : bundleUrl(item.name);
  const label = typeof item.label === 'string' ? item.label : item.name;
  const kind = item.kind === 'text' || item.kind === 'speech' ? item.kind : undefined;
  return { name: item.name, label, url, kind };
}

/**
 * Accepted index.json shapes: ["name", ...], or {"bundles": [...]} whose items are names or
 * {"name", "url"?, "label"?, "kind"?}. Anything else (missing, HTML fallback, bad JSON) -> the default.
 * With ``kind``, bundles declared as another kind are left out (undeclared ones stay).
 */
export async function listBundles(kind?: 'text' | 'speech'): Promise<BundleEntry[]> {
  const fallback = [entry(DEFAULT_BUNDLE) as BundleEntry];
  try {
    const response = await indexResponse(new URL('models/index.json', document.baseURI));
    if (!response.ok) return fallback;
    const data: unknown = JSON.parse(await response.text());
    const items = Array.isArray(data) ? data : (data as { bundles?: unknown } | null)?.bundles;
    if (!Array.isArray(items)) return fallback;
    const entries = items.map(entry)
      .filter((e): e is BundleEntry => e !== null && (!kind || !e.kind || e.kind === kind));
    return entries.length ? entries : fallback;
  } catch {
    return fallback;
  }
}

/** index.json from the server (through the service worker, which answers with its kept copy
 * when the server does not). While the browser knows it is offline, the kept copy is read
 * straight from the cache: a request that can only fail is not made (nor logged). */
async function indexResponse(url: URL): Promise<Response> {
  if (!navigator.onLine) {
    const kept = await self.caches?.match(url.href).catch(() => undefined);
    if (kept) return kept;
  }
  return fetch(url, { cache: 'no-cache' });
}

/** ``bundle`` as index.json lists it (its label, url and kind win), or as given when not listed. */
export function asListed(bundle: BundleEntry, listed: BundleEntry[]): BundleEntry {
  return listed.find((b) => b.name === bundle.name) ?? bundle;
}
