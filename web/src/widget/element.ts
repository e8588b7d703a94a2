// What <onnxpipe-chat> and <onnxpipe-speak> share: the frame, `ready`, requests by id,
// attribute changes, removal from the page, and the onnxpipe-* events.

import { h, ProgressLine } from './dom';
import { FrameLink } from './frame-link';
import { tagged } from './messages';
import type { FrameMessage, HostMessage, WidgetKind, WidgetLoaded } from './protocol';
import { STYLES } from './styles';

/** The error type of rejected promises; its ``kind`` is also onnxpipe-error's detail.kind. */
export class WidgetError extends Error {
  constructor(readonly kind: string, message: string) {
    super(message);
    this.name = 'OnnxpipeWidgetError';
  }
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: WidgetError): void;
  settled: boolean;
}

function deferred<T>(): Deferred<T> {
  const d = { settled: false } as Deferred<T>;
  d.promise = new Promise<T>((resolve, reject) => {
    d.resolve = (v) => { d.settled = true; resolve(v); };
    d.reject = (e) => { d.settled = true; reject(e); };
  });
  d.promise.catch(() => {});   // a page that never awaits `ready` gets no unhandled rejection
  return d;
}

type Handler = (message: FrameMessage) => void;

/** A load's progress in words: what the frame's runtime is doing now. */
const PHASE_TEXT: Record<string, string> = {
  boot: 'Starting the runtime', fetch: 'Downloading', cache: 'Reading from this device', verify: 'Checking', session: 'Opening',
};

function progressText(phase: string, file: string, loaded: number, total: number): string {
  if (phase === 'boot') return `${PHASE_TEXT.boot} (${loaded} of ${total} steps)…`;
  return `${PHASE_TEXT[phase] ?? phase} ${file}…`;
}

export abstract class OnnxpipeElement extends HTMLElement {
  static observedAttributes = ['bundle', 'threads'];

  protected readonly root: ShadowRoot;
  protected readonly body: HTMLElement;
  private link: FrameLink | null = null;
  private loading = deferred<WidgetLoaded>();
  private loadId = 0;
  private nextId = 1;
  private readonly handlers = new Map<number, { on: Handler; fail: (e: WidgetError) => void }>();
  protected loaded: WidgetLoaded | null = null;

  protected abstract readonly kind: WidgetKind;
  /** Build the element's UI into ``this.body`` (once). */
  protected abstract render(): void;
  /** A load's progress and the state line (ready, busy, errors): ``render`` places them. */
  protected readonly progress = new ProgressLine();
  protected readonly status = h('div', { className: 'status', role: 'status', parts: 'status' });
  /** Show a load's progress (percent null: indeterminate), or hide it (text null). */
  protected showProgress(text: string | null, percent: number | null): void {
    this.progress.show(text, percent);
  }

  protected showStatus(text: string, error = false): void {
    this.status.textContent = text;
    this.status.classList.toggle('error', error);
  }

  /** Forget per-bundle state (e.g. the conversation) when a new bundle loads. */
  protected abstract reset(): void;

  /** Enable the element's buttons for what they can do now (isReady: a bundle is loaded). */
  protected abstract syncControls(): void;

  protected get isReady(): boolean {
    return this.loaded !== null;
  }

  constructor() {
    super();
    this.root = this.attachShadow({ mode: 'open' })   // open: a site may style ::part()s and test its page;
    // a constructed sheet, not a <style> element: a host page whose CSP forbids inline styles
    // (onnxpipe's own pages among them, docs/security.md) would drop the element's rules
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLES);
    this.root.adoptedStyleSheets = [sheet];
    this.body = document.createElement('div');
    this.body.className = 'root';
    this.body.setAttribute('part', 'root');
    this.root.append(this.body);
  }

  /** Resolves with the loaded bundle's info once ``bundle`` is loaded; rejects on a load error. */
  get ready(): Promise<WidgetLoaded> {
    return this.loading.promise;
  }

  connectedCallback(): void {
    if (!this.body.firstChild) this.render();
    this.syncControls();
    if (this.link) return;
    this.link = new FrameLink(this.kind, {
      hello: () => this.load(),
      message: (message) => this.receive(message),
      failed: (message) => this.failLoad(new WidgetError('embed', message)),
    });
    this.link.attach(this.root);
    this.showStatus('Starting…');
  }

  disconnectedCallback(): void {
    // the frame (its worker and the model's memory) goes with the element
    this.link?.close();
    this.link = null;
    this.failRequests(new WidgetError('aborted', `<${this.localName}> was removed from the page`));
    this.loaded = null;
    this.syncControls();
  }

  attributeChangedCallback(name: string, old: string | null, value: string | null): void {
    if (old === value || !this.link) return;
    if (name === 'bundle' || name === 'threads') this.load();
  }

  /** Stop the running generation; its promise resolves with what was made so far. */
  cancel(): void {
    this.post({ type: 'cancel', id: this.nextId++ });
  }

  private load(): void {
    const raw = this.getAttribute('bundle');
    if (this.loading.settled) this.loading = deferred<WidgetLoaded>();
    const id = this.nextId++;
    this.loadId = id;   // before failRequests, so the previous load's failure is not taken for this one
    this.failRequests(new WidgetError('aborted', 'a new bundle is loading'));
    this.loaded = null;
    this.syncControls();
    this.reset();
    if (!raw) {
      this.showStatus(`Set the bundle attribute to a model bundle URL.`);
      return;
    }
    const bundle = new URL(raw, document.baseURI).href;   // relative to the host page, like any URL attribute
    const threadsAttr = this.getAttribute('threads');
    const threads = threadsAttr === null ? null : Number(threadsAttr);
    if (threads !== null && !(Number.isInteger(threads) && threads >= 1)) {
      this.failLoad(new WidgetError('input', `threads="${threadsAttr}": expected a whole number >= 1`));
      return;
    }
    const current = this.loading;
    this.showStatus('Loading…');
    this.showProgress('Starting the runtime…', null);
    this.request({ type: 'load', id, bundle, threads }, (message) => {
      if (message.type === 'progress') {
        this.showProgress(progressText(message.phase, message.file, message.loaded, message.total), message.total ? message.percent : null);
        this.emit('onnxpipe-progress', { phase: message.phase, file: message.file, loaded: message.loaded, total: message.total, percent: message.percent });
      } else if (message.type === 'loaded' && this.loadId === id) {
        this.loaded = message.info;
        this.syncControls();
        this.showProgress(null, null);
        this.showStatus(`Ready (${message.info.bundle}, ${message.info.threads} thread${message.info.threads === 1 ? '' : 's'})`);
        current.resolve(message.info);
        return true;
      }
      return false;
    }, (error) => {
      if (this.loadId === id) this.failLoad(error, false);
    });
  }

  private failLoad(error: WidgetError, emit = true): void {
    this.showProgress(null, null);
    this.showStatus(error.message, true);
    if (emit) this.emit('onnxpipe-error', { kind: error.kind, message: error.message });
    this.loading.reject(error);
  }

  /** Send a request; ``on`` sees each answer and returns true when it was the last one;
   * ``fail`` gets its error (already announced as onnxpipe-error unless it was 'aborted'). */
  protected request(message: Parameters<typeof tagged>[0], on: (m: FrameMessage) => boolean, fail: (e: WidgetError) => void): void {
    const id = (message as { id: number }).id;
    this.handlers.set(id, {
      on: (m) => { if (on(m)) this.handlers.delete(id); },
      fail: (e) => {
        this.handlers.delete(id);
        if (e.kind !== 'aborted') this.emit('onnxpipe-error', { kind: e.kind, message: e.message });
        fail(e);
      },
    });
    this.post(message);
  }

  protected newId(): number {
    return this.nextId++;
  }

  protected emit(type: string, detail: object): void {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  /** The loaded info, waiting for a load in progress (rejects if it fails). */
  protected async whenReady(): Promise<WidgetLoaded> {
    return this.loaded ?? (await this.loading.promise);
  }

  private post(message: Parameters<typeof tagged>[0]): void {
    const out: HostMessage = tagged(message);
    this.link?.post(out);
  }

  private receive(message: FrameMessage): void {
    if (message.type === 'hello') return;
    if (message.type === 'runtime') {
      // the frame's worker died and heals itself: say so; requests in flight got a 'stopped' error
      this.showStatus(message.message, message.state !== 'restored');
      this.emit('onnxpipe-runtime', { state: message.state, message: message.message });
      return;
    }
    if (message.type === 'error') {
      const error = new WidgetError(message.kind, message.message);
      const handler = message.id === null ? undefined : this.handlers.get(message.id);
      if (handler) handler.fail(error);
      else this.emit('onnxpipe-error', { kind: error.kind, message: error.message });
      return;
    }
    this.handlers.get(message.id)?.on(message);
  }

  private failRequests(error: WidgetError): void {
    for (const [, handler] of [...this.handlers]) handler.fail(error);
  }
}
