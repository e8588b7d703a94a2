// The microphone level: the RMS the capture worklet measured for each 16 kHz chunk, drawn as a
// bar on a dB scale (-60 dB .. 0 dB) with a peak marker that falls back slowly.

import { el } from '../ui/dom';

const FLOOR_DB = -60;
const PEAK_FALL_DB_PER_S = 20;

export class LevelMeter {
  readonly root: HTMLElement;
  private readonly bar: HTMLElement;
  private readonly peakMark: HTMLElement;
  private peakDb = FLOOR_DB;
  private lastAt = 0;
  /** Last RMS drawn (test hook: data-rms mirrors it). */
  rms = 0;

  constructor() {
    this.bar = el('div', { class: 'voice-level-bar' });
    this.peakMark = el('div', { class: 'voice-level-peak' });
    this.root = el('div', {
      class: 'voice-level', 'data-testid': 'voice-level', role: 'meter', 'aria-label': 'Microphone level',
      'aria-valuemin': FLOOR_DB, 'aria-valuemax': 0, 'aria-valuenow': FLOOR_DB,
    }, this.bar, this.peakMark);
  }

  /** One chunk's RMS (linear, 0..1). */
  update(rms: number): void {
    this.rms = rms;
    const db = Math.max(FLOOR_DB, 20 * Math.log10(Math.max(rms, 1e-9)));
    const now = performance.now();
    const fallen = this.peakDb - ((now - this.lastAt) / 1000) * PEAK_FALL_DB_PER_S;
    this.peakDb = Math.max(db, fallen, FLOOR_DB);
    this.lastAt = now;
    const pct = (d: number) => `${((d - FLOOR_DB) / -FLOOR_DB) * 100}%`;
    this.bar.style.width = pct(db);
    this.peakMark.style.left = pct(this.peakDb);
    this.root.setAttribute('aria-valuenow', db.toFixed(0));
    this.root.dataset.rms = rms.toFixed(5);
  }

  reset(): void {
    this.peakDb = FLOOR_DB;
    this.update(0);
  }
}
