// The last turn's latency: the milestones (end of speech -> detected -> transcript -> first
// reply token -> first audio, each as the time since the previous one and since the end) and
// the timeline of the work behind them, overlapped spans drawn as bars on one time axis.

import { el } from '../ui/dom';
import { formatMs } from '../ui/format';
import { SPANS, SPAN_LABEL, STAGES, STAGE_LABEL, type Span, type SpanMs, type TurnTimeline } from './latency';

/** How far before the end of speech the timeline shows (ms): a long question is cut there. */
const LOOKBACK_MS = 1500;

export class LatencyView {
  readonly root: HTMLElement;
  private readonly cells = new Map<string, { step: HTMLElement; total: HTMLElement }>();
  private readonly timeline: HTMLElement;

  constructor() {
    const rows = STAGES.map((stage) => {
      const step = el('td', { 'data-testid': `voice-latency-${stage}`, text: '–' });
      const total = el('td', { class: 'voice-latency-total', text: '–' });
      this.cells.set(stage, { step, total });
      return el('tr', {}, el('th', { scope: 'row', text: STAGE_LABEL[stage] }), step, total);
    });
    this.timeline = el('ol', { class: 'voice-timeline', 'data-testid': 'voice-timeline', 'aria-label': 'Timeline of the last turn' });
    this.root = el('section', { class: 'voice-latency', 'data-testid': 'voice-latency', 'aria-label': 'Latency' },
      el('h2', { text: 'Latency of the last turn' }),
      el('table', {},
        el('thead', {}, el('tr', {}, el('th', { text: 'stage' }), el('th', { text: 'step' }), el('th', { text: 'since end of speech' }))),
        el('tbody', {}, ...rows)),
      el('h2', { text: 'Timeline (0 = end of your speech; bars that overlap ran at the same time)' }),
      this.timeline);
  }

  show(timeline: TurnTimeline): void {
    const step = timeline.perStage();
    const total = timeline.sinceSpeechEnd();
    for (const stage of STAGES) {
      const cells = this.cells.get(stage);
      if (!cells) continue;
      cells.step.textContent = step[stage] === undefined ? '–' : formatMs(step[stage] as number);
      cells.total.textContent = total[stage] === undefined ? '–' : formatMs(total[stage] as number);
    }
    this.drawTimeline(timeline.spansMs());
  }

  private drawTimeline(spans: Partial<Record<Span, SpanMs>>): void {
    const known = SPANS.filter((s) => spans[s] !== undefined);
    const from = Math.max(-LOOKBACK_MS, Math.min(0, ...known.map((s) => (spans[s] as SpanMs)[0])));
    const to = Math.max(1, ...known.map((s) => { const [a, b] = spans[s] as SpanMs; return b ?? a; }));
    const pct = (ms: number) => `${(((Math.max(from, ms) - from) / (to - from)) * 100).toFixed(2)}%`;
    this.timeline.replaceChildren(...known.map((span) => {
      const [start, end] = spans[span] as SpanMs;
      const bar = el('span', { class: `voice-timeline-bar voice-timeline-${span}` });
      // set through the CSSOM (the page's CSP refuses style attributes)
      bar.style.marginLeft = pct(start);
      bar.style.width = `calc(${pct(end ?? start)} - ${pct(start)})`;
      const took = end === null ? 'running' : formatMs(end - start);
      return el('li', { 'data-span': span, 'data-start': start, 'data-end': end ?? '' },
        el('span', { class: 'voice-timeline-label', text: `${SPAN_LABEL[span]}: ${formatMs(start)} → ${end === null ? '…' : formatMs(end)} (${took})` }),
        el('span', { class: 'voice-timeline-track' }, bar));
    }));
  }

  /** One line for the reply's footer. */
  static summary(timeline: TurnTimeline): string {
    const total = timeline.sinceSpeechEnd();
    return STAGES.filter((s) => total[s] !== undefined)
      .map((s) => `${STAGE_LABEL[s]} ${formatMs(total[s] as number)}`).join(' · ');
  }
}
