// Errors shown in the page until dismissed or replaced: the runtime's with what failed and its
// kind; the user's own (no microphone, access refused) as the plain sentence they are.

import { el } from './dom';
import { isUserSide, type ShownError } from './format';

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
    this.text.textContent = isUserSide(error) ? error.message : `${context} (${error.kind}): ${error.message}`;
    this.root.hidden = false;
  }

  clear(): void {
    this.root.hidden = true;
    this.text.textContent = '';
    delete this.root.dataset.kind;
  }
}
