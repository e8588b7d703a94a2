// One line saying what the page is doing; data-state is the outcome tests wait for.

import { el } from '../ui/dom';

export type SpeechOutcome = 'idle' | 'ready' | 'speaking' | 'stopping' | 'done' | 'cancelled' | 'failed';

export class StatusLine {
  readonly root: HTMLElement;

  constructor() {
    this.root = el('p', { class: 'tts-status', 'data-testid': 'tts-status', role: 'status' });
    this.set('idle', 'Load a voice to start.');
  }

  set(state: SpeechOutcome, text: string): void {
    this.root.dataset.state = state;
    this.root.textContent = text;
  }

  get state(): SpeechOutcome {
    return this.root.dataset.state as SpeechOutcome;
  }
}
