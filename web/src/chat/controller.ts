// The chat's behaviour: load a bundle, send turns, stop, start over. The UI pieces only render.

import type { RuntimeClient } from '../client';
import type { Composer } from './composer';
import type { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import type { LoaderPanel } from '../ui/loader';
import { loadWarnings } from '../ui/loader';
import type { MessageList } from './messages';
import type { SamplingControls } from './sampling';
import type { ChatState, Status } from './state';
import type { StartupLine } from './startup';
import type { StatsLine } from './stats';

export interface ChatView {
  root: HTMLElement;
  loader: LoaderPanel;
  messages: MessageList;
  composer: Composer;
  sampling: SamplingControls;
  stats: StatsLine;
  startup: StartupLine;
  error: ErrorBanner;
}

export class ChatController {
  /** Set when "New chat" is pressed mid-turn: clear once the stopped turn has settled. */
  private clearWhenSettled = false;
  /** Set by Stop for the running turn, so its bubble can say it was cut short. */
  private stopRequested = false;
  private loads = 0;

  /** The runtime starts booting as the page opens (WASM, threads by the worker's rule), so a
   * Load finds it up; Load with WebGPU starts a fresh worker instead (client.ts). */
  constructor(
    private readonly client: RuntimeClient,
    readonly state: ChatState,
    private readonly view: ChatView,
  ) {
    // a failed boot is reported by the load that needs it
    client.boot({ ep: 'wasm' }).then((choice) => view.loader.showThreads(choice), () => {});
    // the worker died and came back (runtime-notice.ts says so): show what now runs, e.g. WASM
    // after a lost WebGPU device; or, when it could not come back, that nothing is loaded
    client.onStatus((status) => {
      if (status.state === 'restored' && status.info) {
        Object.assign(this.state, { loaded: status.info, ep: status.ep });
        view.loader.showLoaded(status.info, status.ep);
      } else if (status.state === 'failed') {
        this.state.loaded = null;
        if (!this.busy && this.state.status !== 'loading') this.setStatus('idle');
      }
    });
  }

  async load(): Promise<void> {
    const { loader, error } = this.view;
    const bundle = loader.bundle;
    if (!bundle || this.state.status === 'loading' || this.busy) return;
    const ep = loader.ep;
    const dtype = loader.dtypeFor(bundle);
    error.clear();
    Object.assign(this.state, { bundle: bundle.name, ep, dtype: dtype ?? null, loaded: null, warnings: [], lastError: null });
    this.setStatus('loading');
    loader.showLoading(bundle, ep, dtype);
    this.view.startup.loading(performance.now(), this.loads++ === 0);
    try {
      const info = await this.client.load(bundle.url, { ep, dtype, onProgress: (e) => loader.progress.update(e) });
      this.view.startup.loaded(info);
      this.state.loaded = info;
      this.state.warnings = loadWarnings(info, ep);
      loader.showLoaded(info, ep);
      this.resetConversation();
      this.setStatus('ready');
      this.view.composer.focus();
    } catch (e) {
      const shown = describeError(e);
      this.state.lastError = { ...shown, during: 'load' };
      loader.showFailed(shown.message);
      error.show(shown, `Loading ${bundle.label} failed`);
      this.setStatus('idle');
    }
  }

  async send(): Promise<void> {
    const { composer, messages, sampling, stats, error } = this.view;
    const text = composer.value.trim();
    if (this.state.status !== 'ready' || !text) return;
    const options = sampling.read();
    if (!options) return;
    error.clear();
    composer.value = '';
    this.state.messages.push({ role: 'user', content: text });
    const userBubble = messages.add('user', text);
    const bubble = messages.add('assistant', '', true);
    this.state.streaming = '';
    this.stopRequested = false;
    this.setStatus('generating');
    stats.start();
    this.view.startup.sent();
    try {
      const result = await this.client.generate({
        messages: this.state.messages.map((m) => ({ ...m })),
        options,
        onToken: (token, ids) => {
          this.state.streaming += token;
          bubble.append(token);
          stats.onToken(ids.length);
          this.view.startup.token();
          messages.scrollToEnd();
        },
      });
      // the worker's text is authoritative; the next turn must carry exactly what it produced
      const content = result.text ?? this.state.streaming;
      const stopped = result.finish_reason === 'cancelled' || this.stopRequested;
      bubble.finish(content, stopped ? (content ? 'stopped' : 'stopped before any output') : undefined);
      this.state.messages.push({ role: 'assistant', content });
      this.state.lastResult = result;
      stats.show(result);
      this.view.startup.done(result.prefill_ms);
    } catch (e) {
      // drop the failed turn so the conversation stays what the page shows; give the text back
      const shown = describeError(e);
      this.state.lastError = { ...shown, during: 'generate' };
      this.state.messages.pop();
      userBubble.remove();
      bubble.remove();
      if (!composer.value) composer.value = text;
      stats.clear();
      error.show(shown, 'Generation failed');
    } finally {
      this.state.streaming = '';
      this.setStatus(this.state.loaded ? 'ready' : 'idle');
      if (this.clearWhenSettled) this.resetConversation();
    }
  }

  async stop(): Promise<void> {
    if (this.state.status !== 'generating') return;
    this.stopRequested = true;
    this.setStatus('stopping');
    try {
      await this.client.cancel();
    } catch (e) {
      const shown = describeError(e);
      this.state.lastError = { ...shown, during: 'cancel' };
      this.view.error.show(shown, 'Stop failed');
    }
  }

  /** Nothing to tell the worker: it starts over when the messages no longer share its prefix. */
  newChat(): void {
    if (this.busy) {
      this.clearWhenSettled = true;
      void this.stop();
      return;
    }
    this.resetConversation();
    this.view.error.clear();
    this.view.composer.focus();
  }

  /** Apply the status to every control, and to data-status on the app root for tests. */
  setStatus(status: Status): void {
    this.state.status = status;
    this.view.root.dataset.status = status;
    const loaded = this.state.loaded !== null;
    this.view.loader.setBusy(status === 'loading' || this.busy, loaded);
    this.view.composer.setMode(
      status === 'generating' || status === 'stopping' || status === 'ready' || status === 'loading' ? status : 'disabled');
    this.view.messages.prompt(emptyText(status, loaded));
  }

  private get busy(): boolean {
    return this.state.status === 'generating' || this.state.status === 'stopping';
  }

  private resetConversation(): void {
    this.clearWhenSettled = false;
    this.state.messages = [];
    this.state.lastResult = null;
    this.view.messages.clear();
    this.view.stats.clear();
  }
}

/** What the empty conversation says: the next thing to do. */
function emptyText(status: Status, loaded: boolean): string {
  if (status === 'loading') return 'The model is loading. Once it is ready, type a message below.';
  return loaded ? 'The model is ready. Type a message below.' : 'Load a model, then type a message below.';
}
