// Prompt box with Send / Stop / New chat. Enter sends, Shift+Enter inserts a newline.

import { el } from '../ui/dom';

export interface ComposerActions {
  send: () => void;
  stop: () => void;
  newChat: () => void;
}

/** disabled: no model; loading: one is on its way (typing waits for it too). */
export type ComposerMode = 'disabled' | 'loading' | 'ready' | 'generating' | 'stopping';

const PLACEHOLDER: Record<ComposerMode, string> = {
  disabled: 'Load a model first',
  loading: 'The model is loading…',
  ready: 'Type a message…',
  generating: 'Type a message…',
  stopping: 'Type a message…',
};

export class Composer {
  readonly root: HTMLFormElement;
  private readonly input: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly newChatButton: HTMLButtonElement;
  private mode: ComposerMode = 'disabled';

  constructor(actions: ComposerActions) {
    this.input = el('textarea', {
      class: 'prompt', 'data-testid': 'prompt', rows: 2, name: 'prompt',
      placeholder: 'Load a model first', 'aria-label': 'Message',
      'aria-describedby': 'composer-hint', disabled: true,
    });
    this.sendButton = el('button', { type: 'submit', class: 'primary', 'data-testid': 'send-button', text: 'Send', disabled: true });
    this.stopButton = el('button', { type: 'button', 'data-testid': 'stop-button', text: 'Stop', disabled: true });
    this.newChatButton = el('button', { type: 'button', 'data-testid': 'new-chat-button', text: 'New chat' });
    this.root = el('form', { class: 'composer', 'aria-label': 'Compose message' },
      this.input,
      el('div', { class: 'composer-actions' },
        el('span', { id: 'composer-hint', class: 'hint', text: 'Enter to send · Shift+Enter for a new line' }),
        this.newChatButton, this.stopButton, this.sendButton));

    this.root.addEventListener('submit', (event) => {
      event.preventDefault();
      if (this.mode === 'ready') actions.send();
    });
    this.input.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter' || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      if (this.mode === 'ready') actions.send();
    });
    this.input.addEventListener('input', () => this.autosize());
    this.stopButton.addEventListener('click', () => actions.stop());
    this.newChatButton.addEventListener('click', () => actions.newChat());
  }

  get value(): string {
    return this.input.value;
  }

  set value(text: string) {
    this.input.value = text;
    this.autosize();
  }

  focus(): void {
    this.input.focus();
  }

  /** Typing stays possible while generating; only sending waits. */
  setMode(mode: ComposerMode): void {
    this.mode = mode;
    this.input.disabled = mode === 'disabled' || mode === 'loading';
    this.input.placeholder = PLACEHOLDER[mode];
    this.sendButton.disabled = mode !== 'ready';
    this.stopButton.disabled = mode !== 'generating';
    this.root.dataset.mode = mode;
  }

  private autosize(): void {
    this.input.style.height = 'auto';
    this.input.style.height = `${Math.min(this.input.scrollHeight + 2, 240)}px`;
  }
}
