// How fast the voice ran: real-time factor (audio seconds per compute second) and its parts,
// live per sentence, then the worker's own totals.

import type { SentenceInfo, SpeechResult } from '../protocol';
import { el } from '../ui/dom';

function seconds(s: number): string {
  return Number.isFinite(s) ? `${s.toFixed(2)} s` : '?';
}

export class SpeechStats {
  readonly root: HTMLElement;
  private readonly rtf: HTMLElement;
  private readonly audio: HTMLElement;
  private readonly compute: HTMLElement;
  private readonly sentences: HTMLElement;
  private readonly firstAudio: HTMLElement;

  constructor() {
    this.rtf = el('strong', { class: 'tts-rtf', 'data-testid': 'tts-rtf' });
    this.audio = el('span', { 'data-testid': 'tts-audio-seconds' });
    this.compute = el('span', { 'data-testid': 'tts-compute-seconds' });
    this.sentences = el('span', { 'data-testid': 'tts-sentence-count' });
    this.firstAudio = el('span', { 'data-testid': 'tts-first-audio', title: 'From Speak to the first audio heard' });
    this.root = el('p', { class: 'stats tts-stats', 'data-testid': 'tts-stats', 'aria-live': 'off' },
      this.rtf, this.firstAudio, this.audio, this.compute, this.sentences);
    this.clear();
  }

  /** Running totals from the sentences made so far. */
  onSentences(list: SentenceInfo[]): void {
    const audio = list.reduce((sum, s) => sum + s.audio_seconds, 0);
    const compute = list.reduce((sum, s) => sum + s.compute_seconds, 0);
    this.set('speaking', compute > 0 ? audio / compute : NaN, audio, compute, list.length);
  }

  show(result: SpeechResult): void {
    this.set(result.finish_reason, result.real_time_factor, result.audio_seconds, result.compute_seconds, result.sentences.length);
  }

  /** Milliseconds from Speak to the first audio heard. */
  showFirstAudio(ms: number): void {
    this.firstAudio.textContent = `first audio ${(ms / 1000).toFixed(2)} s`;
    this.firstAudio.dataset.ms = ms.toFixed(0);
  }

  clear(): void {
    this.root.dataset.state = 'idle';
    this.firstAudio.textContent = 'first audio –';
    delete this.firstAudio.dataset.ms;
    this.rtf.textContent = '– x real time';
    delete this.rtf.dataset.rtf;
    this.audio.textContent = 'audio –';
    this.compute.textContent = 'compute –';
    this.sentences.textContent = '0 sentences';
  }

  private set(state: string, rtf: number, audio: number, compute: number, count: number): void {
    this.root.dataset.state = state;
    this.rtf.textContent = `${Number.isFinite(rtf) ? rtf.toFixed(1) : '–'}x real time`;
    if (Number.isFinite(rtf)) this.rtf.dataset.rtf = rtf.toFixed(3);
    else delete this.rtf.dataset.rtf;
    this.audio.textContent = `audio ${seconds(audio)}`;
    this.compute.textContent = `compute ${seconds(compute)}`;
    this.sentences.textContent = `${count} sentence${count === 1 ? '' : 's'}`;
    Object.assign(this.root.dataset, { audioSeconds: audio.toFixed(3), computeSeconds: compute.toFixed(3), sentences: String(count) });
  }
}
