// The sentences as the voice made them, each with its audio and compute time.

import type { SentenceInfo } from '../protocol';
import { el } from '../ui/dom';

export class SentenceList {
  readonly root: HTMLOListElement;

  constructor() {
    this.root = el('ol', { class: 'tts-sentences', 'data-testid': 'tts-sentences', 'aria-label': 'Sentences' });
  }

  add(sentence: SentenceInfo): void {
    const timing = `${sentence.audio_seconds.toFixed(2)} s in ${sentence.compute_seconds.toFixed(2)} s`;
    this.root.append(el('li', { 'data-testid': 'tts-sentence' },
      el('span', { class: 'tts-sentence-text', text: sentence.text }),
      el('span', { class: 'tts-sentence-timing', text: timing })));
  }

  clear(): void {
    this.root.replaceChildren();
  }
}
