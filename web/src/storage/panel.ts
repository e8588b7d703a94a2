// "Storage on this device": usage and quota, whether storage is persistent, and each stored
// bundle with its size and a remove button. The worker does the listing and removing (it
// owns the files; engine.storage, or RuntimeClient.removeStored), the page asks for persistence.

import { RuntimeClient } from '../client';
import { el } from '../ui/dom';
import { formatBytes } from '../ui/format';
import type { StoredBundle } from '../protocol';
import { askPersistent, deviceStorage } from './device';
import './panel.css';

/** Re-reads of the estimate after a removal (every 500 ms) before the panel settles for it. */
const ESTIMATE_RETRIES = 20;

/** What the panel lists and removes through: the engine's storage extra (engine.storage). */
export interface StorageSource {
  list(): Promise<StoredBundle[]>;
  remove(key: string): Promise<StoredBundle[]>;
  onChange(listener: () => void): () => void;
}

/** A page still on its own RuntimeClient. */
function clientSource(client: RuntimeClient): StorageSource {
  return { list: () => client.storedBundles(), remove: (key) => client.removeStored(key), onChange: (listener) => client.onLoaded(listener) };
}

export class StoragePanel {
  readonly root: HTMLElement;
  private readonly usage = el('p', { class: 'storage-usage', 'data-testid': 'storage-usage' });
  private readonly persistent = el('p', { class: 'storage-persistent', 'data-testid': 'storage-persistent' });
  private readonly list = el('ul', { class: 'storage-list', 'data-testid': 'storage-list' });
  private readonly message = el('p', { class: 'storage-message', 'data-testid': 'storage-message', hidden: true });
  private refreshing: Promise<void> = Promise.resolve();

  private readonly source: StorageSource;

  constructor(source: RuntimeClient | StorageSource) {
    this.source = source instanceof RuntimeClient ? clientSource(source) : source;
    this.root = el('section', { class: 'storage-panel', 'data-testid': 'storage-panel', 'aria-label': 'Storage on this device' },
      el('h2', { text: 'Storage on this device' }), this.usage, this.persistent, this.list, this.message);
    this.source.onChange(() => void this.refresh());
  }

  /** Re-read the stored bundles and the estimate; resolves when the panel shows them. */
  refresh(): Promise<void> {
    this.refreshing = this.refreshing.then(() => this.render()).catch((e: unknown) => this.say(`Could not read this device's storage: ${String(e)}`));
    return this.refreshing;
  }

  private async render(): Promise<void> {
    const bundles = await this.source.list();
    // a stored model is worth keeping: ask once that the browser not evict it
    if (bundles.length) await askPersistent();
    const device = await deviceStorage();
    this.usage.textContent = `${formatBytes(device.usage)} used of ${formatBytes(device.quota)} available to this site`;
    this.usage.dataset.usage = String(device.usage);
    this.usage.dataset.quota = String(device.quota);
    this.persistent.textContent = device.persisted
      ? 'Persistent: the browser keeps these files until you remove them.'
      : 'Not persistent: the browser may clear these files when the device runs low on space.';
    this.persistent.dataset.persisted = String(device.persisted);
    this.list.replaceChildren(...bundles.map((b) => this.row(b)));
    if (!bundles.length) this.list.append(el('li', { class: 'storage-empty', 'data-testid': 'storage-empty', text: 'No models stored yet.' }));
    this.root.dataset.state = 'ready';
  }

  private row(bundle: StoredBundle): HTMLElement {
    const remove = el('button', { type: 'button', class: 'storage-remove', 'data-testid': 'storage-remove', text: 'Remove from this device' });
    remove.addEventListener('click', () => void this.remove(bundle, remove));
    return el('li', { class: 'storage-bundle', 'data-testid': 'storage-bundle', 'data-key': bundle.key, 'data-bytes': bundle.bytes, title: bundle.url },
      el('span', { class: 'storage-name', text: bundle.name }),
      el('span', { class: 'storage-size', 'data-testid': 'storage-size', text: formatBytes(bundle.bytes) }),
      remove);
  }

  private async remove(bundle: StoredBundle, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    this.root.dataset.state = 'removing';
    const usedBefore = Number(this.usage.dataset.usage ?? NaN);
    let removed = false;
    try {
      await this.source.remove(bundle.key);
      removed = true;
      this.say(`Removed ${bundle.name} (${formatBytes(bundle.bytes)}) from this device.`);
    } catch (e) {
      this.say(`Could not remove ${bundle.name}: ${e instanceof Error ? e.message : String(e)}`);
    }
    await this.refresh();
    // Chromium's usage estimate can lag a deletion by seconds (it is updated in the
    // background): read it again for a while, so the panel does not keep the old figure
    for (let i = 0; removed && i < ESTIMATE_RETRIES && Number(this.usage.dataset.usage) > usedBefore - bundle.bytes; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await this.refresh();
    }
  }

  private say(text: string): void {
    this.message.textContent = text;
    this.message.hidden = false;
  }
}

/** Add the panel to ``container`` and fill it. */
export function mountStoragePanel(container: Element, source: RuntimeClient | StorageSource): StoragePanel {
  const panel = new StoragePanel(source);
  container.append(panel.root);
  void panel.refresh();
  return panel;
}
