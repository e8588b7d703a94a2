// Voice settings: one slider + number per control the bundle declares (pipeline.json inputs).

import type { ControlInfo } from '../protocol';
import { el } from '../chat/dom';

interface Row {
  root: HTMLElement;
  info: ControlInfo;
  number: HTMLInputElement;
  slider: HTMLInputElement | null;
  hint: HTMLElement;
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
    this.rows = controls.map((info) => this.row(info));
    this.list.replaceChildren(...(this.rows.length
      ? this.rows.map((r) => r.root)
      : [el('p', { class: 'field-hint', text: 'This voice has no settings.' })]));
    this.root.dataset.controls = controls.map((c) => c.name).join(',');
    this.setDisabled(this.disabled);
  }

  /** Values by control name, or null (with the browser's message shown) when one is invalid. */
  read(): Record<string, number> | null {
    const values: Record<string, number> = {};
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
    for (const row of this.rows) this.set(row, row.info.default, true);
  }

  setDisabled(disabled: boolean): void {
    this.disabled = disabled;
    for (const row of this.rows) {
      row.number.disabled = disabled;
      if (row.slider) row.slider.disabled = disabled;
    }
    this.resetButton.disabled = disabled || this.rows.length === 0;
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
    this.set(row, info.default, true);
    return row;
  }

  private set(row: Row, value: number, moveSlider: boolean): void {
    row.number.value = String(value);
    if (row.slider && moveSlider) row.slider.value = String(value);
    row.hint.textContent = describe(row.info, value);
  }
}
