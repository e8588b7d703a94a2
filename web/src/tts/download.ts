// "Download WAV": the worker's WAV bytes behind an object URL, replaced with each new speech.

import { el } from '../ui/dom';
import { formatBytes } from '../ui/format';

export class WavDownload {
  readonly root: HTMLAnchorElement;
  private url: string | null = null;

  constructor(private readonly fileName = 'speech.wav') {
    this.root = el('a', { class: 'button tts-download', 'data-testid': 'tts-download', text: 'Download WAV' });
    this.clear();
  }

  set(wav: Uint8Array): void {
    this.clear();
    // copy: the Blob must own plain ArrayBuffer bytes whatever view the worker sent
    this.url = URL.createObjectURL(new Blob([new Uint8Array(wav)], { type: 'audio/wav' }));
    this.root.href = this.url;
    this.root.download = this.fileName;
    this.root.removeAttribute('aria-disabled');
    this.root.dataset.bytes = String(wav.length);
    this.root.title = `${this.fileName}, ${formatBytes(wav.length)}`;
  }

  clear(): void {
    if (this.url) URL.revokeObjectURL(this.url);
    this.url = null;
    this.root.removeAttribute('href');
    this.root.removeAttribute('download');
    this.root.setAttribute('aria-disabled', 'true');
    this.root.dataset.bytes = '0';
    this.root.title = 'Speak something first';
  }
}
