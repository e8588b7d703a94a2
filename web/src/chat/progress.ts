// Model-load progress: one row per file (bytes and percent) under an overall bar.

import type { Event } from '../protocol';
import { el } from './dom';
import { clampPercent, formatBytes } from './format';

type ProgressEvent = Extract<Event, { type: 'progress' }>;

interface Row {
  root: HTMLElement;
  phase: HTMLElement;
  bar: HTMLProgressElement;
  detail: HTMLElement;
  loaded: number;
  total: number;
}

const PHASE_LABEL: Record<ProgressEvent['phase'], string> = {
  boot: 'starting runtime',
  fetch: 'downloading',
  cache: 'from this device',
  verify: 'verifying',
  session: 'opening session',
};

/** Percent from bytes when the total is known, else the worker's own figure. */
function percentOf(event: ProgressEvent): number {
  if (event.total > 0) return clampPercent((event.loaded / event.total) * 100);
  return clampPercent(event.percent);
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
    this.overall.value = 0;
    this.summary.textContent = 'Starting…';
    this.root.hidden = false;
    this.files.open = true;
    this.root.dataset.state = 'running';
  }

  update(event: ProgressEvent): void {
    const key = event.file || event.phase;
    const row = this.rows.get(key) ?? this.addRow(key);
    const percent = percentOf(event);
    if (event.total > 0) {
      // later phases (session) may carry no byte counts; keep the download's
      row.loaded = event.loaded;
      row.total = event.total;
    }
    row.phase.textContent = PHASE_LABEL[event.phase] ?? event.phase;
    row.bar.value = percent;
    row.root.dataset.phase = event.phase;
    row.root.dataset.percent = percent.toFixed(1);
    const bytes = event.total > 0
      ? `${formatBytes(event.loaded)} / ${formatBytes(event.total)}`
      : row.total > 0 ? formatBytes(row.total) : '';
    row.detail.textContent = bytes ? `${bytes} · ${percent.toFixed(0)}%` : `${percent.toFixed(0)}%`;
    this.updateOverall();
  }

  /** Leave the final figures visible, marked done or failed. */
  finish(ok: boolean): void {
    this.root.dataset.state = ok ? 'done' : 'failed';
    if (ok) {
      this.overall.value = 100;
      for (const row of this.rows.values()) {
        row.bar.value = 100;
        row.phase.textContent = 'ready';
      }
      this.files.open = false;
    }
    this.summary.textContent = `${ok ? 'Done' : 'Failed'} · ${this.summary.textContent ?? ''}`;
  }

  private addRow(key: string): Row {
    const label = key === 'boot' ? 'Python runtime (Pyodide)' : key;
    const phase = el('span', { class: 'progress-phase' });
    const bar = el('progress', { max: 100, value: 0, 'aria-label': `${label} progress` });
    const detail = el('span', { class: 'progress-detail' });
    const root = el('div', { class: 'progress-row', 'data-testid': 'progress-file', 'data-file': key },
      el('span', { class: 'progress-name', title: label, text: label }), phase, bar, detail);
    this.list.append(root);
    const row: Row = { root, phase, bar, detail, loaded: 0, total: 0 };
    this.rows.set(key, row);
    return row;
  }

  private updateOverall(): void {
    let loaded = 0;
    let total = 0;
    for (const row of this.rows.values()) {
      if (row.total <= 0) continue;
      loaded += Math.min(row.loaded, row.total);
      total += row.total;
    }
    const percent = total > 0 ? clampPercent((loaded / total) * 100) : 0;
    this.overall.value = percent;
    this.root.dataset.percent = percent.toFixed(1);
    const files = this.rows.size;
    this.summary.textContent =
      `${files} file${files === 1 ? '' : 's'} · ${formatBytes(loaded)} / ${formatBytes(total)} · ${percent.toFixed(0)}%`;
  }
}
