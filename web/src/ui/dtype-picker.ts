// The precision (dtype) picker: shown once a loaded folder offers several dtypes (a
// transformers.js folder: fp32, fp16, q4, q4f16, ...); picking one reloads with it.

import type { LoadedInfo } from '../protocol';
import { el, labelled } from './dom';

/** Value of the option standing for "no dtype asked": the folder's default for the provider. */
const AUTO = '';

export class DtypePicker {
  readonly root: HTMLLabelElement;
  private readonly select: HTMLSelectElement;
  /** The bundle whose dtypes are listed; the picker means nothing for any other one. */
  private bundle: string | null = null;

  constructor(onPick: () => void) {
    this.select = el('select', { 'data-testid': 'dtype-select', name: 'dtype' });
    this.select.addEventListener('change', () => onPick());
    this.root = labelled('Precision (dtype)', this.select, 'Files this model folder offers; changing it reloads.');
    this.root.hidden = true;
  }

  /** After a load: list what the folder offers (several dtypes only), the opened one selected. */
  show(info: LoadedInfo, bundle: string): void {
    if (info.dtypes.length < 2) {
      this.bundle = null;
      this.root.hidden = true;
      this.select.replaceChildren();
      return;
    }
    this.bundle = bundle;
    const options = info.dtype === null ? [el('option', { value: AUTO, text: 'default for the provider' })] : [];
    for (const dtype of info.dtypes) options.push(el('option', { value: dtype, text: dtype }));
    this.select.replaceChildren(...options);
    this.select.value = info.dtype ?? AUTO;
    this.root.hidden = false;
  }

  /** Shown only while the bundle picker names the bundle whose dtypes it lists. */
  follow(bundle: string | undefined): void {
    this.root.hidden = this.bundle === null || bundle !== this.bundle;
  }

  /** The dtype to ask for when loading ``bundle`` (undefined: the folder's default). */
  requested(bundle: string): string | undefined {
    return bundle === this.bundle && this.select.value !== AUTO ? this.select.value : undefined;
  }

  set disabled(value: boolean) {
    this.select.disabled = value;
  }
}
