// Search options for each turn: greedy/sample toggle plus the sampler's knobs.

import type { SearchOptions } from '../protocol';
import { el, labelled } from '../ui/dom';

/** The SearchOptions fields that hold a number. */
type NumericKey = {
  [K in keyof SearchOptions]-?: NonNullable<SearchOptions[K]> extends number ? K : never;
}[keyof SearchOptions];

interface NumberSpec {
  key: NumericKey;
  testid: string;
  caption: string;
  min: number;
  max: number;
  step: number;
  value: string;
  hint?: string;
  samplingOnly: boolean;
}

// Greedy by default, like the bundle's own generation defaults; sampling values apply on "Sample".
const FIELDS: NumberSpec[] = [
  { key: 'temperature', testid: 'temperature', caption: 'Temperature', min: 0, max: 2, step: 0.05, value: '0.7', samplingOnly: true },
  { key: 'top_k', testid: 'top-k', caption: 'Top-k', min: 0, max: 1000, step: 1, value: '50', hint: '0 = off', samplingOnly: true },
  { key: 'top_p', testid: 'top-p', caption: 'Top-p', min: 0, max: 1, step: 0.01, value: '0.9', hint: '1 = off', samplingOnly: true },
  { key: 'min_p', testid: 'min-p', caption: 'Min-p', min: 0, max: 1, step: 0.01, value: '0', hint: '0 = off', samplingOnly: true },
  { key: 'random_seed', testid: 'seed', caption: 'Seed', min: 0, max: 2 ** 31 - 1, step: 1, value: '', hint: 'empty = random', samplingOnly: true },
  { key: 'repetition_penalty', testid: 'repetition-penalty', caption: 'Repetition penalty', min: 1, max: 2, step: 0.01, value: '1', hint: '1 = off', samplingOnly: false },
  { key: 'max_new_tokens', testid: 'max-new-tokens', caption: 'Max new tokens', min: 1, max: 8192, step: 1, value: '256', samplingOnly: false },
];

export class SamplingControls {
  readonly root: HTMLElement;
  private readonly form: HTMLFormElement;
  private readonly sample: HTMLInputElement;
  private readonly inputs = new Map<NumberSpec, HTMLInputElement>();
  private readonly lookup: HTMLInputElement;

  constructor() {
    const greedy = el('input', { type: 'radio', name: 'mode', value: 'greedy', checked: true, 'data-testid': 'mode-greedy' });
    this.sample = el('input', { type: 'radio', name: 'mode', value: 'sample', 'data-testid': 'mode-sample' });
    const mode = el('fieldset', { class: 'mode' },
      el('legend', { text: 'Decoding' }),
      el('label', { class: 'radio' }, greedy, ' Greedy'),
      el('label', { class: 'radio' }, this.sample, ' Sample'));
    const grid = el('div', { class: 'sampling-grid' });
    for (const spec of FIELDS) {
      const input = el('input', {
        type: 'number', inputmode: 'decimal', min: spec.min, max: spec.max, step: spec.step,
        value: spec.value, name: spec.key, 'data-testid': spec.testid,
        placeholder: spec.key === 'random_seed' ? 'random' : undefined,
      });
      this.inputs.set(spec, input);
      grid.append(labelled(spec.caption, input, spec.hint));
    }
    // prompt lookup: draft tokens copied from the conversation, verified 4 per decoder pass
    this.lookup = el('input', { type: 'checkbox', name: 'prompt_lookup', 'data-testid': 'prompt-lookup' });
    const drafts = el('label', { class: 'checkbox', title: 'Copies likely continuations from the conversation and checks several per pass: same reply, often faster' },
      this.lookup, ' Prompt lookup (speculative decoding)');
    this.form = el('form', { class: 'sampling-form', novalidate: true }, mode, grid, drafts);
    this.form.addEventListener('submit', (event) => event.preventDefault());
    for (const radio of [greedy, this.sample]) radio.addEventListener('change', () => this.syncMode());
    this.root = el('details', {
      class: 'sampling', 'data-testid': 'sampling', open: window.matchMedia('(min-width: 821px)').matches,
    },
      el('summary', { text: 'Sampling' }), this.form);
    this.syncMode();
  }

  get doSample(): boolean {
    return this.sample.checked;
  }

  /** The options for one turn, or null (with the browser's message shown) when a field is invalid. */
  read(): SearchOptions | null {
    const options: SearchOptions = { do_sample: this.doSample };
    for (const [spec, input] of this.inputs) {
      if (spec.samplingOnly && !this.doSample) continue;
      if (!input.checkValidity()) {
        this.root.setAttribute('open', '');
        input.reportValidity();
        return null;
      }
      if (input.value.trim() === '') continue;
      options[spec.key] = input.valueAsNumber;
    }
    options.speculative = this.lookup.checked ? { method: 'prompt_lookup', max_draft: 4, ngram: 3 } : null;
    return options;
  }

  private syncMode(): void {
    for (const [spec, input] of this.inputs) {
      if (spec.samplingOnly) input.disabled = !this.doSample;
    }
    this.root.dataset.mode = this.doSample ? 'sample' : 'greedy';
  }
}
