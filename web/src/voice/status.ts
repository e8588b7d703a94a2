// One line saying where the conversation is; data-state is the phase tests wait for.

import { el } from '../ui/dom';
import type { Phase } from './turn';

export class StatusLine {
  readonly root: HTMLElement;

  constructor() {
    this.root = el('p', { class: 'voice-status', 'data-testid': 'voice-status', role: 'status' });
    this.set('off', 'Press Start to talk with the assistant.');
  }

  set(phase: Phase, text: string): void {
    this.root.dataset.state = phase;
    this.root.textContent = text;
  }

  /** Say what happens between phases (checking the microphone, loading, why Start failed);
   * data-state keeps the phase. */
  say(text: string): void {
    this.root.textContent = text;
  }
}
