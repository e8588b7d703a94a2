// What the pages show when their runtime worker died and healed (RuntimeClient.onStatus):
// one line, data-testid="runtime-notice", data-state stopped | restored | failed.

import type { RuntimeStatus } from './client';

/** A RuntimeClient, or an engine (engine.onStatus: every model's worker). */
export interface StatusSource {
  onStatus(listener: (status: RuntimeStatus) => void): () => void;
}

/** The sentence a page (or the widget) shows for ``status``; ``label`` names the runtime
 * where a page has several (the voice page's four models). */
export function describeStatus(status: RuntimeStatus, label = 'The runtime'): string {
  switch (status.state) {
    case 'stopped':
      return `${label} stopped (${status.reason}); restarting and loading the model again from this device…`;
    case 'restored': {
      const what = status.info ? `${status.info.bundle} reloaded from this device` : 'ready';
      const gpu = /WebGPU device/.test(status.reason) ? ', now on WASM' : '';
      return `${label} was restarted (${status.reason}): ${what}${gpu}. Try again.`;
    }
    case 'failed':
      return `${label} could not be restarted: ${status.message}`;
  }
}

/** A dismissable notice bound to ``client``; put ``root`` where the page shows errors. */
export class RuntimeNotice {
  readonly root: HTMLElement;
  private readonly text: HTMLElement;

  constructor(client: StatusSource, label?: string) {
    this.text = document.createElement('span');
    const dismiss = document.createElement('button');
    dismiss.type = 'button';
    dismiss.className = 'link';
    dismiss.setAttribute('aria-label', 'Dismiss');
    dismiss.textContent = '×';
    dismiss.addEventListener('click', () => {
      this.root.hidden = true;
    });
    this.root = document.createElement('div');
    this.root.className = 'error runtime-notice';
    this.root.dataset.testid = 'runtime-notice';
    this.root.setAttribute('role', 'status');
    this.root.hidden = true;
    this.root.append(this.text, dismiss);
    client.onStatus((status) => this.show(status, label));
  }

  private show(status: RuntimeStatus, label?: string): void {
    this.root.dataset.state = status.state;
    this.root.dataset.kind = status.state === 'restored' ? 'info' : 'stopped';
    this.text.textContent = describeStatus(status, label);
    this.root.hidden = false;
  }
}
