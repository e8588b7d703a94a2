// Model-load progress: one row per file (bytes and percent), one for the runtime's start (steps)
// and one for opening the sessions, under an overall bar. Every row says what it waits for, and
// a percent is shown only where something is counted.

import type { ProgressEvent } from '../protocol';
import { el } from './dom';
import { clampPercent, formatBytes } from './format';

interface Row {
  root: HTMLElement;
  phase: HTMLElement;
  bar: HTMLProgressElement;
  detail: HTMLElement;
  /** The row's last phase; 'verified': the loader moved past the file's check; 'ready': the
   * runtime's start is done. */
  state: ProgressEvent['phase'] | 'verified' | 'ready';
  loaded: number;
  total: number;
}

const PHASE_LABEL: Record<Row['state'], string> = {
  boot: 'starting',
  fetch: 'downloading',
  cache: 'from this device',
  verify: 'checking',
  verified: 'downloaded and checked',
  session: 'opening',
  ready: 'ready',
};

const FILE_PHASES: ReadonlySet<Row['state']> = new Set(['fetch', 'cache', 'verify', 'verified']);

const ROW_NAME: Partial<Record<ProgressEvent['phase'], string>> = {
  boot: 'runtime (Python, ONNX Runtime)',
};

/** Percent from bytes when the total is known, else the worker's own figure. */
function percentOf(event: ProgressEvent): number {
  if (event.total > 0) return clampPercent((event.loaded / event.total) * 100);
  return clampPercent(event.percent);
}

/** A <progress> without a value is the browser's "busy, amount unknown" bar. */
function indeterminate(bar: HTMLProgressElement): void {
  bar.removeAttribute('value');
}

export class ProgressView {
  readonly root: HTMLElement;
  private readonly summary: HTMLElement;
  private readonly overall: HTMLProgressElement;
  private readonly files: HTMLDetailsElement;
  private readonly list: HTMLElement;
  private readonly rows = new Map<string, Row>();

  constructor() {
    this.overall = el('progress', { max: 100, value: 0, 'data-testid': 'progress-bar', 'aria-label': 'Overall model load progress' });
    this.summary = el('span', { class: 'progress-summary', 'data-testid': 'progress-summary' });
    this.list = el('div', { class: 'progress-list' });
    // per-file rows stay in the DOM after loading, folded away
    this.files = el('details', { class: 'progress-files', open: true }, el('summary', { text: 'Files' }), this.list);
    this.root = el('section', {
      class: 'progress', 'data-testid': 'progress', 'aria-label': 'Model load progress', hidden: true,
    }, el('div', { class: 'progress-overall' }, this.overall, this.summary), this.files);
  }

  reset(): void {
    this.rows.clear();
    this.list.replaceChildren();
    indeterminate(this.overall);
    this.summary.textContent = 'Starting…';
    this.root.hidden = false;
    this.files.open = true;
    this.root.dataset.state = 'running';
    delete this.root.dataset.percent;
  }

  update(event: ProgressEvent): void {
    const key = event.phase === 'boot' ? 'runtime' : event.file || event.phase;
    // the worker loads files one after another: a row still checking when another row hears
    // news has passed its check (a failed one would have ended the load)
    for (const [other, row] of this.rows) {
      if (other !== key && row.state === 'verify') this.show(row, 'verified', 100, `${formatBytes(row.total)} · checked`);
    }
    const row = this.rows.get(key) ?? this.addRow(key, ROW_NAME[event.phase] ?? key);
    if (event.phase === 'boot') {
      const ready = event.total > 0 && event.loaded >= event.total;
      this.show(row, ready ? 'ready' : 'boot', percentOf(event), `${event.loaded} of ${event.total} steps done`);
    } else if (event.phase === 'session') {
      // nothing to count while the engine opens its sessions: a busy bar, no percent
      this.show(row, 'session', null, 'opening the engine sessions…');
    } else {
      if (event.total > 0) {
        row.loaded = event.loaded;
        row.total = event.total;
      }
      const percent = percentOf(event);
      const bytes = event.total > 0 ? `${formatBytes(event.loaded)} / ${formatBytes(event.total)}` : '';
      this.show(row, event.phase, percent, bytes ? `${bytes} · ${percent.toFixed(0)}%` : `${percent.toFixed(0)}%`);
    }
    this.updateOverall();
  }

  /** Leave the final figures visible, marked done or failed (failed: with what it was doing). */
  finish(ok: boolean): void {
    this.root.dataset.state = ok ? 'done' : 'failed';
    if (!ok) {
      if (!this.overall.hasAttribute('value')) this.overall.value = 0;
      this.summary.textContent = `Failed · ${this.summary.textContent ?? ''}`;
      return;
    }
    this.overall.value = 100;
    for (const row of this.rows.values()) {
      if (row.state === 'session' || row.state === 'verify') row.detail.textContent = row.total > 0 ? formatBytes(row.total) : 'ready';
      row.state = 'ready';
      row.bar.value = 100;
      row.phase.textContent = PHASE_LABEL.ready;
      row.root.dataset.phase = 'ready';
    }
    this.files.open = false;
    this.summary.textContent = `Done · ${this.bytes().counted || 'nothing to download'}`;
  }

  private show(row: Row, state: Row['state'], percent: number | null, detail: string): void {
    row.state = state;
    row.phase.textContent = PHASE_LABEL[state];
    if (percent === null) indeterminate(row.bar);
    else row.bar.value = percent;
    row.root.dataset.phase = state;
    if (percent === null) delete row.root.dataset.percent;
    else row.root.dataset.percent = percent.toFixed(1);
    row.detail.textContent = detail;
  }

  private addRow(key: string, label: string): Row {
    const phase = el('span', { class: 'progress-phase' });
    const bar = el('progress', { max: 100, value: 0, 'aria-label': `${label} progress` });
    const detail = el('span', { class: 'progress-detail' });
    const root = el('div', { class: 'progress-row', 'data-testid': 'progress-file', 'data-file': key },
      el('span', { class: 'progress-name', title: label, text: label }), phase, bar, detail);
    this.list.append(root);
    const row: Row = { root, phase, bar, detail, state: 'boot', loaded: 0, total: 0 };
    this.rows.set(key, row);
    return row;
  }

  /** The files' bytes so far, and the line that counts them ('' before any file). */
  private bytes(): { loaded: number; total: number; counted: string } {
    const files = [...this.rows.values()].filter((r) => FILE_PHASES.has(r.state) || (r.state === 'ready' && r.total > 0));
    let loaded = 0;
    let total = 0;
    for (const row of files) {
      if (row.total <= 0) continue;
      loaded += Math.min(row.loaded, row.total);
      total += row.total;
    }
    if (total <= 0) return { loaded, total, counted: '' };
    const percent = clampPercent((loaded / total) * 100);
    const counted = `${files.length} file${files.length === 1 ? '' : 's'} · ${formatBytes(loaded)} / ${formatBytes(total)} · ${percent.toFixed(0)}%`;
    return { loaded, total, counted };
  }

  /** The overall bar counts bytes of files; before any file, it says what it waits for. */
  private updateOverall(): void {
    const boot = this.rows.get('runtime');
    const opening = [...this.rows.values()].some((r) => r.state === 'session');
    const { loaded, total, counted } = this.bytes();
    if (total <= 0) {
      indeterminate(this.overall);
      delete this.root.dataset.percent;
      this.summary.textContent = boot?.state === 'boot'
        ? `Starting the runtime (${boot.detail.textContent})…`
        : opening ? 'Opening the model…' : 'Reading the model\'s files…';
      return;
    }
    const percent = clampPercent((loaded / total) * 100);
    this.overall.value = percent;
    this.root.dataset.percent = percent.toFixed(1);
    this.summary.textContent = opening ? `${counted} · opening the model…` : counted;
  }
}
