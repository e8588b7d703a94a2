// Time to first token, broken down: from opening the page (or pressing Load again) to the first
// token of the first reply. The worker's stages (LoadedInfo.startup) run partly at once, so the
// line splits the timeline into parts that follow each other (they add up to the total), and
// names the parallel stages under "runtime" with their own durations. Only the total shows;
// the figures wait behind a disclosure (most readers never need them).

import type { LoadedInfo, StartupStage } from '../protocol';
import { el } from '../ui/dom';
import { formatMs } from '../ui/format';

export type PartName = 'page' | 'runtime' | 'files' | 'session' | 'you' | 'prefill' | 'first token';

export interface Breakdown {
  total: number;
  parts: [PartName, number][];
  /** the worker's stages by name (summed when a name repeats), each its own duration */
  stages: [StartupStage['name'], number][];
}

interface Marks {
  origin: number; // page clock: page opened, or Load pressed again
  loadAt: number; // load requested
  loadedAt: number;
  sentAt: number;
  firstTokenAt: number;
  prefillMs: number;
  info: LoadedInfo;
}

/** Parts that follow each other on the page's clock; each is >= 0 and they sum to the total. */
export function breakdown(m: Marks): Breakdown {
  const page = (epoch: number): number => epoch - performance.timeOrigin;
  const all = m.info.startup.stages;
  const boot = all.filter((s) => s.name === 'pyodide' || s.name === 'onnxruntime' || s.name === 'import');
  const session = all.find((s) => s.name === 'session');
  const bootStart = boot.length ? Math.min(...boot.map((s) => page(s.start))) : m.loadAt;
  const bootEnd = boot.length ? Math.max(...boot.map((s) => page(s.end))) : m.loadAt;
  // each mark no earlier than the one before: a stage done before an earlier mark costs nothing
  const t1 = Math.max(m.origin, Math.min(bootStart, m.loadAt));
  const t2 = Math.max(t1, bootEnd);
  const t2b = Math.max(t2, m.loadAt);   // Load pressed after the runtime was up
  const t3 = Math.max(t2b, session ? page(session.start) : t2b);
  const t4 = Math.max(t3, m.loadedAt);
  const t5 = Math.max(t4, m.sentAt);
  const t6 = Math.max(t5, m.firstTokenAt);
  const prefill = Math.min(Math.max(0, m.prefillMs), t6 - t5);
  const parts: [PartName, number][] = [
    ['page', t1 - m.origin], ['runtime', t2 - t1], ['files', t3 - t2b], ['session', t4 - t3],
    ['you', t2b - t2 + (t5 - t4)], ['prefill', prefill], ['first token', t6 - t5 - prefill],
  ];
  const stages = new Map<StartupStage['name'], number>();
  for (const s of all) stages.set(s.name, (stages.get(s.name) ?? 0) + Math.max(0, s.end - s.start));
  return { total: t6 - m.origin, parts, stages: [...stages] };
}

const STAGE_LABEL: Record<StartupStage['name'], string> = {
  pyodide: 'pyodide', onnxruntime: 'onnxruntime', import: 'import', files: 'files read', session: 'sessions opened',
};

export class StartupLine {
  readonly root: HTMLDetailsElement;
  private readonly summary: HTMLElement;
  private readonly body: HTMLElement;
  private origin = 0;   // the page opened at 0 on its own clock
  private loadAt = 0;
  private pending: Omit<Marks, 'sentAt' | 'firstTokenAt' | 'prefillMs'> | null = null;
  private sentAt = 0;
  private firstTokenAt = 0;

  constructor() {
    this.summary = el('summary', { 'data-testid': 'ttft-summary' });
    this.body = el('p', { class: 'startup-body' });
    this.root = el('details', { class: 'startup', 'data-testid': 'ttft', hidden: true }, this.summary, this.body);
  }

  /** A load is starting: the page's first load counts from the page opening, later ones from now. */
  loading(loadAt: number, first: boolean): void {
    if (!first) this.origin = loadAt;
    this.pending = null;
    this.loadAt = loadAt;
  }

  loaded(info: LoadedInfo): void {
    this.pending = { origin: this.origin, loadAt: this.loadAt, loadedAt: performance.now(), info };
  }

  /** The first reply after a load is the one measured. */
  sent(): void {
    if (!this.pending) return;
    this.sentAt = performance.now();
    this.firstTokenAt = 0;
  }

  token(): void {
    if (this.pending && this.sentAt && !this.firstTokenAt) this.firstTokenAt = performance.now();
  }

  done(prefillMs: number): void {
    if (!this.pending || !this.firstTokenAt) return;
    this.show(breakdown({ ...this.pending, sentAt: this.sentAt, firstTokenAt: this.firstTokenAt, prefillMs }),
      this.pending.info.startup.python_snapshot);
    this.pending = null;
  }

  private show(b: Breakdown, snapshot: string): void {
    const part = ([name, ms]: [string, number]) =>
      el('span', { class: 'startup-part', 'data-testid': 'ttft-part', 'data-part': name, 'data-ms': ms.toFixed(1), text: `${name} ${formatMs(ms)}` });
    const stage = ([name, ms]: [StartupStage['name'], number]) =>
      el('span', { class: 'startup-stage', 'data-testid': 'ttft-stage', 'data-stage': name, 'data-ms': ms.toFixed(1), text: `${STAGE_LABEL[name]} ${formatMs(ms)}` });
    const sep = (list: HTMLElement[]) => list.flatMap((node, i) => (i ? [' · ', node] : [node]));
    this.root.dataset.totalMs = b.total.toFixed(1);
    this.root.dataset.pythonSnapshot = snapshot;
    this.summary.textContent = `First token ${formatMs(b.total)} after ${this.origin === 0 ? 'opening the page' : 'pressing Load'}`;
    this.body.replaceChildren(
      el('span', { class: 'startup-parts', text: 'one after another: ' }), ...sep(b.parts.map(part)),
      el('br'),
      el('span', { class: 'startup-stages', text: 'each stage (some run at once): ' }), ...sep(b.stages.map(stage)),
      ` · Python ${snapshot === 'restored' ? 'from this device\'s snapshot' : snapshot === 'made' ? 'started (snapshot kept for next time)' : 'started'}`);
    this.root.hidden = false;
  }
}
