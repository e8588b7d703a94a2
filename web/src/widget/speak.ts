// <onnxpipe-speak bundle="…">: a speak box. Sentences play as they are made; the whole take
// is then offered as a WAV player. Scripted: `await el.speak(text)` resolves with the
// speech's figures ({audio_seconds, sample_rate, …}) and `wav` (a Blob).

import { SentencePlayer } from './audio';
import { h } from './dom';
import { OnnxpipeElement, WidgetError } from './element';
import type { WidgetSpoken } from './protocol';

export type SpeakResult = Omit<WidgetSpoken, 'wav'> & { wav: Blob };

export class OnnxpipeSpeak extends OnnxpipeElement {
  protected readonly kind = 'speak';
  private busy = false;
  private wavUrl: string | null = null;
  private readonly player = new SentencePlayer();
  private readonly text = h('textarea', { placeholder: 'Text to speak', rows: 3, parts: 'input' });
  private readonly speakButton = h('button', { type: 'button', textContent: 'Speak', disabled: true, parts: 'speak' });
  private readonly stopButton = h('button', { type: 'button', textContent: 'Stop', className: 'secondary', disabled: true, parts: 'stop' });
  private readonly audio = h('audio', { controls: true, hidden: true, parts: 'audio' });

  protected render(): void {
    this.text.setAttribute('aria-label', 'Text to speak');
    this.speakButton.addEventListener('click', () => {
      const text = this.text.value.trim();
      if (text && !this.speakButton.disabled) this.speak(text).catch(() => {});   // shown in the status line and as onnxpipe-error
    });
    this.stopButton.addEventListener('click', () => this.cancel());
    this.body.append(this.text, this.progress.el, h('div', { className: 'row' }, this.speakButton, this.stopButton), this.audio, this.status);
  }

  protected reset(): void {
    this.player.stop();
    this.setWav(null);
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    this.player.close();
  }

  override cancel(): void {
    this.player.stop();
    super.cancel();
  }

  /** Speak ``text``; resolves once all of it is made (also after cancel(), with what was made). */
  async speak(text: string): Promise<SpeakResult> {
    if (typeof text !== 'string' || !text.trim()) throw new WidgetError('input', `speak(text): expected a non-empty string, got ${JSON.stringify(text)}`);
    await this.whenReady();
    if (this.busy) throw new WidgetError('input', 'speak(): speech is still being made (await it, or cancel() first)');
    this.setBusy(true);
    this.player.start();
    this.setWav(null);
    this.showStatus('Speaking…');
    try {
      const spoken = await new Promise<WidgetSpoken>((resolve, reject) => {
        this.request({ type: 'speak', id: this.newId(), text }, (m) => {
          if (m.type === 'audio') {
            this.player.enqueue(m.samples, m.sampleRate);
            this.emit('onnxpipe-audio', { index: m.index, text: m.text, samples: m.samples.length, sampleRate: m.sampleRate });
          } else if (m.type === 'spoken') {
            resolve(m.result);
            return true;
          }
          return false;
        }, reject);
      });
      const wav = new Blob([spoken.wav as Uint8Array<ArrayBuffer>], { type: 'audio/wav' });
      this.setWav(wav);
      const result: SpeakResult = { ...spoken, wav };
      this.showStatus(`${spoken.audio_seconds.toFixed(1)} s of audio at ${spoken.sample_rate} Hz`);
      this.emit('onnxpipe-done', { audio_seconds: spoken.audio_seconds, sample_rate: spoken.sample_rate, finish_reason: spoken.finish_reason });
      return result;
    } catch (e) {
      this.showStatus((e as Error).message, true);
      throw e;
    } finally {
      this.setBusy(false);
    }
  }

  private setWav(wav: Blob | null): void {
    if (this.wavUrl) URL.revokeObjectURL(this.wavUrl);
    this.wavUrl = wav ? URL.createObjectURL(wav) : null;
    this.audio.hidden = !this.wavUrl;
    if (this.wavUrl) this.audio.src = this.wavUrl;
    else this.audio.removeAttribute('src');
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    this.syncControls();
  }

  /** Speak waits for the voice and for the speech being made; Stop only has speech to stop. */
  protected syncControls(): void {
    this.speakButton.disabled = this.busy || !this.isReady;
    this.stopButton.disabled = !this.busy;
  }
}
