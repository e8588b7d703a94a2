// Voice settings: per control the bundle declares (pipeline.json inputs), a slider + number,
// or a <select> for a choice control (e.g. Kokoro's voices).

import type { ControlInfo, ControlValue } from '../protocol';
import { el, labelled } from '../ui/dom';

interface Row {
  root: HTMLElement;
  info: ControlInfo;
  number: HTMLInputElement;
  slider: HTMLInputElement | null;
  hint: HTMLElement;
}

interface Choice {
  root: HTMLElement;
  info: ControlInfo;
  select: HTMLSelectElement;
}

/** Piper's length_scale stretches time: show its speed too (1 / length_scale). */
function describe(info: ControlInfo, value: number): string {
  if (info.name === 'length_scale' && value > 0) return `speed ×${(1 / value).toFixed(2)}`;
  return '';
}

function caption(info: ControlInfo): string {
  const doc = info.doc.trim();
  return doc || info.name.replace(/_/g, ' ');
}

export class VoiceControls {
  readonly root: HTMLElement;
  private readonly form: HTMLFormElement;
  private readonly list: HTMLElement;
  private readonly resetButton: HTMLButtonElement;
  private rows: Row[] = [];
  private choices: Choice[] = [];
  private disabled = true;

  constructor() {
    this.list = el('div', { class: 'tts-controls-list' },
      el('p', { class: 'field-hint', text: 'Load a voice to see its settings.' }));
    this.resetButton = el('button', { type: 'button', 'data-testid': 'tts-controls-reset', text: 'Defaults', disabled: true });
    this.resetButton.addEventListener('click', () => this.reset());
    this.form = el('form', { class: 'tts-controls-form', novalidate: true }, this.list, this.resetButton);
    this.form.addEventListener('submit', (event) => event.preventDefault());
    this.root = el('details', { class: 'sampling tts-controls', 'data-testid': 'tts-controls', open: true },
      el('summary', { text: 'Voice settings' }), this.form);
  }

  setControls(controls: ControlInfo[]): void {
    const roots: HTMLElement[] = [];
    this.rows = [];
    this.choices = [];
    for (const info of controls) {   // declaration order, choices among the numbers
      if (info.options.length > 0) {
        const choice = this.choice(info);
        this.choices.push(choice);
        roots.push(choice.root);
      } else {
        const row = this.row(info);
        this.rows.push(row);
        roots.push(row.root);
      }
    }
    this.list.replaceChildren(...(roots.length
      ? roots
      : [el('p', { class: 'field-hint', text: 'This voice has no settings.' })]));
    this.root.dataset.controls = controls.map((c) => c.name).join(',');
    this.setDisabled(this.disabled);
  }

  /** Values by control name, or null (with the browser's message shown) when one is invalid. */
  read(): Record<string, ControlValue> | null {
    const values: Record<string, ControlValue> = {};
    for (const choice of this.choices) values[choice.info.name] = choice.select.value;
    for (const row of this.rows) {
      if (!row.number.checkValidity() || row.number.value.trim() === '') {
        this.root.setAttribute('open', '');
        row.number.reportValidity();
        return null;
      }
      values[row.info.name] = row.number.valueAsNumber;
    }
    return values;
  }

  reset(): void {
    for (const row of this.rows) this.set(row, Number(row.info.default), true);
    for (const choice of this.choices) choice.select.value = String(choice.info.default);
  }

  setDisabled(disabled: boolean): void {
    this.disabled = disabled;
    for (const row of this.rows) {
      row.number.disabled = disabled;
      if (row.slider) row.slider.disabled = disabled;
    }
    for (const choice of this.choices) choice.select.disabled = disabled;
    this.resetButton.disabled = disabled || this.rows.length + this.choices.length === 0;
  }

  private choice(info: ControlInfo): Choice {
    const select = el('select', { name: info.name, 'data-testid': `tts-control-${info.name}` },
      ...info.options.map((option) => el('option', { value: option, text: option })));
    select.value = String(info.default);
    const root = labelled(caption(info), select, `${info.name} · default ${info.default}`);
    root.classList.add('tts-control');
    root.dataset.control = info.name;
    return { root, info, select };
  }

  private row(info: ControlInfo): Row {
    const name = caption(info);
    const bounded = info.min !== null && info.max !== null && info.max > info.min;
    // step "any": a default such as 0.667 must be sent as is, not snapped to a grid
    const number = el('input', {
      type: 'number', inputmode: 'decimal', step: 'any', name: info.name, 'aria-label': name,
      min: info.min ?? undefined, max: info.max ?? undefined, 'data-testid': `tts-control-${info.name}`,
    });
    const slider = bounded
      ? el('input', {
          type: 'range', min: info.min ?? 0, max: info.max ?? 1, step: 'any', 'aria-label': name,
          'data-testid': `tts-slider-${info.name}`,
        })
      : null;
    const hint = el('span', { class: 'field-hint tts-control-speed' });
    const range = bounded ? ` · ${info.min}–${info.max}` : '';
    // a div, not a label: a label would name only its first control (the slider)
    const root = el('div', { class: 'field tts-control', 'data-control': info.name },
      el('span', { class: 'field-caption', text: name }),
      el('span', { class: 'tts-control-inputs' }, slider, number),
      el('span', { class: 'field-hint' }, el('code', { text: info.name }), `${range} · default ${info.default}`),
      hint);
    const row: Row = { root, info, number, slider, hint };
    slider?.addEventListener('input', () => this.set(row, Math.round(slider.valueAsNumber * 1000) / 1000, false));
    number.addEventListener('input', () => {
      if (slider && Number.isFinite(number.valueAsNumber)) slider.value = String(number.valueAsNumber);
      hint.textContent = describe(info, number.valueAsNumber);
    });
    this.set(row, Number(info.default), true);
    return row;
  }

  private set(row: Row, value: number, moveSlider: boolean): void {
    row.number.value = String(value);
    if (row.slider && moveSlider) row.slider.value = String(value);
    row.hint.textContent = describe(row.info, value);
  }
}
