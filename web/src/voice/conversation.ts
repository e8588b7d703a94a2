// The spoken conversation: what the recogniser heard, the reply as it streams, and under each
// reply the turn's latency line. Text is always set as textContent (never HTML).

import { el } from '../ui/dom';
import type { Mode } from './controls';
import type { Phase } from './turn';

/** What the empty conversation says: what to do now to ask something. */
export function promptFor(phase: Phase, mode: Mode, loading: boolean, failed: boolean): string {
  if (loading) return 'Getting ready: the microphone, then the four models (downloaded once, then kept on this device)…';
  switch (phase) {
    case 'off':
      return failed ? 'Press Start again once the problem above is fixed.' : 'Press Start and ask something out loud.';
    case 'listening':
      return mode === 'hands-free'
        ? 'Listening: ask something out loud.'
        : 'Hold the "Hold to talk" button (or the space bar on it) while you ask.';
    case 'hearing':
      return 'Hearing you…';
    default:
      return 'Working out what you said…';
  }
}

export class ReplyView {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;
  private readonly foot: HTMLElement;

  constructor() {
    this.body = el('div', { class: 'msg-body', 'aria-live': 'polite', 'data-testid': 'voice-reply' });
    this.foot = el('div', { class: 'msg-note voice-turn-latency', 'data-testid': 'voice-turn-latency' });
    this.root = el('article', { class: 'msg msg-assistant streaming', 'data-role': 'assistant', 'aria-label': 'Assistant' },
      el('div', { class: 'msg-who', 'aria-hidden': 'true', text: 'Assistant' }), this.body, this.foot);
  }

  append(text: string): void {
    this.body.append(text);
  }

  /** The final text; ``note`` marks a reply cut short (barge-in, error). */
  finish(text: string, note?: string): void {
    this.root.classList.remove('streaming');
    if (this.body.textContent !== text) this.body.textContent = text;
    if (note) this.root.dataset.note = note;
    if (note) this.root.insertBefore(el('div', { class: 'msg-note', text: note }), this.foot);
  }

  setLatency(text: string): void {
    this.foot.textContent = text;
  }
}

export class Conversation {
  readonly root: HTMLElement;
  private readonly empty: HTMLElement;

  constructor() {
    this.empty = el('p', { class: 'messages-empty', 'data-testid': 'voice-empty', text: promptFor('off', 'hands-free', false, false) });
    this.root = el('section', { class: 'messages voice-messages', 'data-testid': 'voice-conversation', 'aria-label': 'Conversation', tabindex: 0 }, this.empty);
  }

  /** Change the empty conversation's line (it goes with the first transcript). */
  prompt(text: string): void {
    this.empty.textContent = text;
  }

  /** What the user said (the transcript); returns its element. */
  heard(text: string): HTMLElement {
    this.empty.remove();
    const article = el('article', { class: 'msg msg-user', 'data-role': 'user', 'aria-label': 'You' },
      el('div', { class: 'msg-who', 'aria-hidden': 'true', text: 'You' }),
      el('div', { class: 'msg-body', 'data-testid': 'voice-transcript', text }));
    this.root.append(article);
    this.scrollToEnd();
    return article;
  }

  reply(): ReplyView {
    const view = new ReplyView();
    this.root.append(view.root);
    this.scrollToEnd();
    return view;
  }

  scrollToEnd(): void {
    this.root.scrollTop = this.root.scrollHeight;
  }
}
