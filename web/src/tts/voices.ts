// Which bundles the speech page offers: the demo voice first, then what /models/index.json lists.

import { DEFAULT_BUNDLE, asListed, bundleUrl, listBundles, type BundleEntry } from '../ui/bundles';

export const DEFAULT_VOICE = 'piper-en-us-joe';

/** The chat's default model is a text bundle, so it is left out; any other listed bundle is
 * offered, and the page says so when a loaded one turns out not to speak. The demo voice is
 * named as index.json labels it (its folder name only when the index does not list it). */
export async function listVoices(): Promise<BundleEntry[]> {
  const listed = await listBundles('speech');
  const voice = asListed({ name: DEFAULT_VOICE, label: DEFAULT_VOICE, url: bundleUrl(DEFAULT_VOICE) }, listed);
  return [voice, ...listed.filter((b) => b.name !== DEFAULT_VOICE && b.name !== DEFAULT_BUNDLE)];
}
