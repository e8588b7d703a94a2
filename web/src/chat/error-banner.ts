// Errors from the runtime, shown in the page (kind + message) until dismissed or replaced.

import { el } from './dom';
import type { ShownError } from './format';

export class ErrorBanner {
  readonly root: HTMLElement;
  private readonly text: HTMLElement;

  constructor() {
    this.text = el('span', { class: 'error-text' });
    const dismiss = el('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss error', text: '×' });
    dismiss.addEventListener('click', () => this.clear());
    this.root = el('div', { class: 'error', 'data-testid': 'error', role: 'alert', hidden: true }, this.text, dismiss);
  }

  show(error: ShownError, context: string): void {
    this.root.dataset.kind = error.kind;
    this.text.textContent = `${context} (${error.kind}): ${error.message}`;
    this.root.hidden = false;
  }

  clear(): void {
    this.root.hidden = true;
    this.text.textContent = '';
    delete this.root.dataset.kind;
  }
}
