// The waveform picture: min/max of the samples under each pixel column, redrawn as sentences
// arrive (the time axis always spans the audio made so far), with a playhead while playing.

import { el } from '../ui/dom';
import type { Take } from './take';

const HEIGHT_CSS_PX = 140;

export class Waveform {
  readonly root: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private readonly caption: HTMLElement;
  private take: Take | null = null;
  /** Per pixel column: lowest and highest sample. Recomputed only when the audio or width changes. */
  private low = new Float32Array(0);
  private high = new Float32Array(0);
  private marks: number[] = []; // sentence starts, in columns
  private playhead: number | null = null; // seconds

  constructor() {
    this.canvas = el('canvas', {
      class: 'tts-waveform', 'data-testid': 'tts-waveform', role: 'img', 'aria-label': 'Waveform: no audio yet',
      height: HEIGHT_CSS_PX,
    });
    this.caption = el('figcaption', { class: 'tts-waveform-caption', text: 'No audio yet.' });
    this.root = el('figure', { class: 'tts-figure' }, this.canvas, this.caption);
    // size the bitmap to the laid-out width (and pixel ratio) so columns are real pixels
    new ResizeObserver(() => this.resize()).observe(this.canvas);
  }

  /** Show this take (its later sentences appear on update()). */
  show(take: Take): void {
    this.take = take;
    this.playhead = null;
    this.update();
  }

  /** The take grew (or was cleared): recompute the columns and draw. */
  update(): void {
    this.measure();
    this.draw();
    const take = this.take;
    const seconds = take?.seconds ?? 0;
    const sentences = take?.chunks.length ?? 0;
    const text = take && take.length
      ? `${seconds.toFixed(2)} s · ${sentences} sentence${sentences === 1 ? '' : 's'} · ${take.sampleRate} Hz`
      : 'No audio yet.';
    this.caption.textContent = text;
    this.canvas.setAttribute('aria-label', `Waveform: ${text}`);
    Object.assign(this.canvas.dataset, { samples: String(take?.length ?? 0), sentences: String(sentences) });
  }

  /** Move the playhead (seconds into the take), or hide it with null. */
  setPlayhead(seconds: number | null): void {
    if (seconds === this.playhead) return;
    this.playhead = seconds;
    this.draw();
  }

  private resize(): void {
    const width = Math.max(1, Math.round(this.canvas.clientWidth * devicePixelRatio));
    const height = Math.max(1, Math.round(this.canvas.clientHeight * devicePixelRatio));
    if (width === this.canvas.width && height === this.canvas.height) return;
    this.canvas.width = width;
    this.canvas.height = height;
    this.update();
  }

  private measure(): void {
    const columns = this.canvas.width;
    const take = this.take;
    this.low = new Float32Array(columns);
    this.high = new Float32Array(columns);
    this.marks = [];
    if (!take || take.length === 0) return;
    const perColumn = take.length / columns;
    let column = 0;
    let end = perColumn;
    let low = Infinity;
    let high = -Infinity;
    let index = 0;
    // one pass over every chunk; a column may span chunk edges
    for (const chunk of take.chunks) {
      for (let i = 0; i < chunk.length; i++, index++) {
        while (index >= end && column < columns - 1) {
          this.low[column] = low === Infinity ? 0 : low;
          this.high[column] = high === -Infinity ? 0 : high;
          column++;
          end = (column + 1) * perColumn;
          low = Infinity;
          high = -Infinity;
        }
        const v = chunk[i];
        if (v < low) low = v;
        if (v > high) high = v;
      }
    }
    this.low[column] = low === Infinity ? 0 : low;
    this.high[column] = high === -Infinity ? 0 : high;
    // columns narrower than a sample repeat the last value instead of dropping to zero
    for (let c = column + 1; c < columns; c++) {
      this.low[c] = this.low[column];
      this.high[c] = this.high[column];
    }
    this.marks = take.boundaries().map((at) => Math.round(at / perColumn));
  }

  private draw(): void {
    const ctx = this.canvas.getContext('2d');
    if (!ctx) return;
    const { width, height } = this.canvas;
    ctx.clearRect(0, 0, width, height);
    const take = this.take;
    if (!take || take.length === 0) return;
    const style = getComputedStyle(this.canvas);
    const accent = style.getPropertyValue('--accent').trim() || '#2f5fd0';
    const muted = style.getPropertyValue('--muted').trim() || '#5b6475';
    const border = style.getPropertyValue('--border').trim() || '#d9dde5';
    const mid = height / 2;
    // sentence edges first, behind the wave
    ctx.fillStyle = border;
    for (const x of this.marks) ctx.fillRect(x, 0, Math.max(1, devicePixelRatio), height);
    // full scale is ±1: quiet audio looks quiet
    const played = this.playhead === null ? -1 : Math.round((this.playhead / take.seconds) * width);
    for (let x = 0; x < width; x++) {
      const top = Math.round(mid - this.high[x] * mid);
      const bottom = Math.round(mid - this.low[x] * mid);
      ctx.fillStyle = played < 0 || x <= played ? accent : muted;
      ctx.fillRect(x, top, 1, Math.max(1, bottom - top));
    }
    if (played >= 0) {
      ctx.fillStyle = style.getPropertyValue('--text').trim() || '#1d2330';
      ctx.fillRect(Math.min(played, width - 1), 0, Math.max(1, devicePixelRatio), height);
    }
  }
}
