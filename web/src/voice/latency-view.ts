// The last turn's latency, stage by stage: end of speech -> detected -> transcript -> first
// reply token -> first audio, each as the time since the previous stage and since the end.

import { el } from '../ui/dom';
import { formatMs } from '../ui/format';
import { STAGES, STAGE_LABEL, type TurnTimeline } from './latency';

export class LatencyView {
  readonly root: HTMLElement;
  private readonly cells = new Map<string, { step: HTMLElement; total: HTMLElement }>();

  constructor() {
    const rows = STAGES.map((stage) => {
      const step = el('td', { 'data-testid': `voice-latency-${stage}`, text: '–' });
      const total = el('td', { class: 'voice-latency-total', text: '–' });
      this.cells.set(stage, { step, total });
      return el('tr', {}, el('th', { scope: 'row', text: STAGE_LABEL[stage] }), step, total);
    });
    this.root = el('section', { class: 'voice-latency', 'data-testid': 'voice-latency', 'aria-label': 'Latency' },
      el('h2', { text: 'Latency of the last turn' }),
      el('table', {},
        el('thead', {}, el('tr', {}, el('th', { text: 'stage' }), el('th', { text: 'step' }), el('th', { text: 'since end of speech' }))),
        el('tbody', {}, ...rows)));
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
  }

  /** One line for the reply's footer. */
  static summary(timeline: TurnTimeline): string {
    const total = timeline.sinceSpeechEnd();
    return STAGES.filter((s) => total[s] !== undefined)
      .map((s) => `${STAGE_LABEL[s]} ${formatMs(total[s] as number)}`).join(' · ');
  }
}
