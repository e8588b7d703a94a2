// One line saying where the conversation is; data-state is the phase tests wait for.

import { el } from '../ui/dom';
import type { Phase } from './turn';

const PHASE_TEXT: Record<Phase, string> = {
  off: 'Press Start to talk with the assistant.',
  listening: 'Listening…',
  hearing: 'Hearing you…',
  transcribing: 'Transcribing…',
  thinking: 'Thinking…',
  speaking: 'Speaking… (talk to interrupt)',
};

export class StatusLine {
  readonly root: HTMLElement;

  constructor() {
    this.root = el('p', { class: 'voice-status', 'data-testid': 'voice-status', role: 'status' });
    this.set('off');
  }

  /** The conversation is in ``phase`` now: its line. */
  set(phase: Phase): void {
    this.root.dataset.state = phase;
    this.root.textContent = PHASE_TEXT[phase];
  }

  /** Say what happens between phases (checking the microphone, loading, why Start failed);
   * data-state keeps the phase. */
  say(text: string): void {
    this.root.textContent = text;
  }
}
