// Bundle picker, execution-provider picker, Load button, progress and the loaded-model status.

import type { ExecutionProvider, LoadedInfo, ThreadChoice } from '../protocol';
import type { BundleEntry } from './bundles';
import { el, labelled } from './dom';
import { DtypePicker } from './dtype-picker';
import { formatMs } from './format';
import { ProgressView } from './progress';

/** WebGPU is offered only where the browser exposes it. */
export function availableProviders(): ExecutionProvider[] {
  return 'gpu' in navigator && navigator.gpu ? ['wasm', 'webgpu'] : ['wasm'];
}

const EP_LABEL: Record<ExecutionProvider, string> = { wasm: 'WASM (CPU)', webgpu: 'WebGPU' };

const THREADS_WHY: Record<LoadedInfo['threads_reason'], string> = {
  rule: 'one per core, at most 4; 2 threads measured faster than 1 on 2 cores',
  explicit: 'as the load asked',
  'not isolated': 'the page is not cross-origin isolated: no shared memory for threads',
};

/** Warnings worth showing: the worker's own, plus any session not on the requested provider. */
export function loadWarnings(info: LoadedInfo, requested: ExecutionProvider): string[] {
  const warnings = [...info.warnings];
  for (const [name, session] of Object.entries(info.sessions)) {
    if (!session.provider.toLowerCase().includes(requested)) {
      const note = `Session "${name}" runs on ${session.provider}, not ${EP_LABEL[requested]} as requested.`;
      if (!warnings.some((w) => w.includes(`"${name}"`) && w.includes(session.provider))) warnings.push(note);
    }
  }
  return warnings;
}

export class LoaderPanel {
  readonly root: HTMLElement;
  readonly progress = new ProgressView();
  private readonly bundleSelect: HTMLSelectElement;
  private readonly epSelect: HTMLSelectElement;
  private readonly dtypePicker: DtypePicker;
  private readonly button: HTMLButtonElement;
  private readonly status: HTMLElement;
  private readonly warnings: HTMLUListElement;
  private readonly threads: HTMLElement;
  private bundles: BundleEntry[] = [];

  constructor(onLoad: () => void) {
    this.bundleSelect = el('select', { 'data-testid': 'bundle-select', name: 'bundle' });
    this.epSelect = el('select', { 'data-testid': 'ep-select', name: 'ep' });
    this.dtypePicker = new DtypePicker(onLoad);
    this.bundleSelect.addEventListener('change', () => this.dtypePicker.follow(this.bundle?.name));
    for (const ep of availableProviders()) this.epSelect.append(el('option', { value: ep, text: EP_LABEL[ep] }));
    this.button = el('button', { type: 'submit', class: 'primary', 'data-testid': 'load-button', text: 'Load' });
    this.status = el('p', { class: 'load-status', 'data-testid': 'load-status', role: 'status', text: 'No model loaded.' });
    this.threads = el('p', { class: 'load-threads', 'data-testid': 'threads', hidden: true });
    this.warnings = el('ul', { class: 'load-warnings', 'data-testid': 'load-warnings', role: 'alert', hidden: true });
    const form = el('form', { class: 'loader-form', 'aria-label': 'Model' },
      labelled('Model bundle', this.bundleSelect),
      labelled('Execution provider', this.epSelect),
      this.dtypePicker.root,
      this.button);
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      onLoad();
    });
    this.root = el('section', { class: 'loader', 'aria-label': 'Model loading' },
      form, this.status, this.threads, this.warnings, this.progress.root);
  }

  setBundles(bundles: BundleEntry[]): void {
    this.bundles = bundles;
    this.bundleSelect.replaceChildren(
      ...bundles.map((b) => el('option', { value: b.name, text: b.label })));
  }

  get bundle(): BundleEntry | undefined {
    return this.bundles.find((b) => b.name === this.bundleSelect.value) ?? this.bundles[0];
  }

  /** The dtype picked for ``bundle`` (undefined: its default, or a bundle without a choice). */
  dtypeFor(bundle: BundleEntry): string | undefined {
    return this.dtypePicker.requested(bundle.name);
  }

  get ep(): ExecutionProvider {
    return this.epSelect.value === 'webgpu' ? 'webgpu' : 'wasm';
  }

  /** Pickers and button are locked while loading or generating. */
  setBusy(busy: boolean, loaded: boolean): void {
    this.bundleSelect.disabled = busy;
    this.epSelect.disabled = busy;
    this.dtypePicker.disabled = busy;
    this.button.disabled = busy || this.bundles.length === 0;
    this.button.textContent = loaded ? 'Reload' : 'Load';
  }

  showLoading(bundle: BundleEntry, ep: ExecutionProvider, dtype?: string): void {
    this.progress.reset();
    this.setWarnings([]);
    this.status.dataset.state = 'loading';
    this.status.textContent = `Loading ${bundle.label}${dtype ? ` (${dtype})` : ''} on ${EP_LABEL[ep]}…`;
  }

  showLoaded(info: LoadedInfo, ep: ExecutionProvider): void {
    this.progress.finish(true);
    // the bundle picker is locked while loading, so it still names the bundle just loaded
    const bundle = this.bundle?.name;
    if (bundle) this.dtypePicker.show(info, bundle);
    this.status.dataset.state = 'loaded';
    const sessions = Object.entries(info.sessions)
      .map(([name, s]) => `${name}: ${s.provider} (${s.file})`).join(', ');
    const template = info.has_chat_template || info.kind === 'speech' ? '' : ' · no chat template';
    this.status.textContent =
      `Loaded ${info.bundle}${info.dtype ? ` (${info.dtype})` : ''} in ${formatMs(info.load_ms)} (runtime boot ${formatMs(info.boot_ms)}) · ` +
      `${info.structure} · ${sessions || 'no sessions'}${template}`;
    this.setWarnings(loadWarnings(info, ep));
    this.showThreads({ threads: info.threads, reason: info.threads_reason });
  }

  /** The runtime's WASM thread count and why (shown once it has started, and after each load). */
  showThreads(choice: ThreadChoice): void {
    this.threads.dataset.threads = String(choice.threads);
    this.threads.dataset.reason = choice.reason;
    this.threads.textContent = `${choice.threads} WASM thread${choice.threads === 1 ? '' : 's'} (${choice.reason}: ${THREADS_WHY[choice.reason]})`;
    this.threads.hidden = false;
  }

  showFailed(message: string): void {
    this.progress.finish(false);
    this.status.dataset.state = 'failed';
    this.status.textContent = `Load failed: ${message}`;
  }

  private setWarnings(warnings: string[]): void {
    this.warnings.replaceChildren(...warnings.map((w) => el('li', { text: w })));
    this.warnings.hidden = warnings.length === 0;
  }
}
