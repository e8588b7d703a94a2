// Which bundles the speech page offers: the demo voice first, then what /models/index.json lists.

import { DEFAULT_BUNDLE, bundleUrl, listBundles, type BundleEntry } from '../chat/bundles';

export const DEFAULT_VOICE = 'piper-en-us-joe';

/** The chat's default model is a text bundle, so it is left out; any other listed bundle is
 * offered, and the page says so when a loaded one turns out not to speak. */
export async function listVoices(): Promise<BundleEntry[]> {
  const voice: BundleEntry = { name: DEFAULT_VOICE, label: DEFAULT_VOICE, url: bundleUrl(DEFAULT_VOICE) };
  const listed = await listBundles('speech');
  return [voice, ...listed.filter((b) => b.name !== DEFAULT_VOICE && b.name !== DEFAULT_BUNDLE)];
}
