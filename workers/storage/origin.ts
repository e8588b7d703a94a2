// Where a bundle's files may come from (docs/security.md): the page's own origin only, and
// each manifest entry a path inside the bundle's folder. A manifest naming "../other/x.onnx",
// "/elsewhere" or "https://host/x" would otherwise make the worker fetch (and Python read) a
// file the bundle does not hold.

import type { Manifest } from './bundle-index';
import { LoadError } from './errors';

/** Refuses a bundle on another origin than ``own`` (the worker's, i.e. the page's or frame's). */
export function checkBundleOrigin(base: URL, own: string): void {
  if (base.origin !== own) {
    throw new LoadError('bundle', `bundle ${base.href} is on another origin than this page (${own}): ` +
      `onnxpipe loads model files only from its own origin; serve the bundle from ${own}`);
  }
}

/** Refuses a manifest entry that is not a plain relative path inside the bundle at ``base``. */
export function checkManifestPaths(manifest: Manifest, base: URL): void {
  for (const file of manifest.files) {
    const path = typeof file?.path === 'string' ? file.path : '';
    const segments = path.split('/');
    const url = path ? new URL(path, base) : null;
    if (!path || /^[a-z][a-z0-9+.-]*:|^[/\\]|\\/i.test(path) || segments.some((s) => s === '..' || s === '.' || s === '')
      || !url || url.origin !== base.origin || !url.href.startsWith(base.href)) {
      throw new LoadError('bundle', `manifest.json: expected each file's "path" to be a relative path inside the bundle, found ${JSON.stringify(file?.path)}`);
    }
  }
}
