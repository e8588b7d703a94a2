// "Update available — Reload": shown when a new build's service worker is waiting.

import { el } from '../ui/dom';

export class UpdatePrompt {
  private root: HTMLElement | null = null;

  /** Show the banner (once); `reload` activates the waiting worker, which then reloads the page. */
  show(reload: () => Promise<void>): void {
    if (this.root) return;
    const button = el('button', { type: 'button', class: 'primary', 'data-testid': 'update-reload', text: 'Reload' });
    const later = el('button', { type: 'button', class: 'link', 'aria-label': 'Not now', text: '×' });
    this.root = el('div', { class: 'update-prompt', role: 'status', 'data-testid': 'update-prompt' },
      el('span', { text: 'Update available: a new version of onnxpipe is ready.' }), button, later);
    button.addEventListener('click', () => {
      button.disabled = true;
      button.textContent = 'Reloading…';
      void reload();
    });
    later.addEventListener('click', () => this.root?.remove());
    document.body.append(this.root);
  }
}
