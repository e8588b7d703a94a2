// The chat's behaviour: load a bundle, send turns, stop, start over. The UI pieces only render.

import type { Engine } from '../engine/engine';
import type { ChatParams } from '../engine/chat-params';
import type { OnnxpipeChatStats } from '../engine/chat';
import type { GenerationResult, SearchOptions, ThreadChoice, ToolCall } from '../protocol';
import type { Composer } from './composer';
import type { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import type { LoaderPanel } from '../ui/loader';
import { loadWarnings } from '../ui/loader';
import type { MessageList } from './messages';
import type { SamplingControls } from './sampling';
import type { SchemaBox } from './schema';
import type { ChatState, Status } from './state';
import type { StartupLine } from './startup';
import type { StatsLine } from './stats';

export interface ChatView {
  root: HTMLElement;
  loader: LoaderPanel;
  messages: MessageList;
  composer: Composer;
  sampling: SamplingControls;
  schema: SchemaBox;
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
  /** The model the page loaded (its bundle URL, the engine's model id), else null. */
  model: string | null = null;
  /** Aborts the running turn (Stop). */
  private abort: AbortController | null = null;

  /** The engine's runtime starts booting as the page opens (WASM, threads by the worker's rule),
   * so a Load finds it up; Load with WebGPU starts a fresh worker instead (client.ts). */
  constructor(
    private readonly engine: Engine,
    booted: Promise<ThreadChoice>,
    readonly state: ChatState,
    private readonly view: ChatView,
  ) {
    // a failed boot is reported by the load that needs it
    booted.then((choice) => view.loader.showThreads(choice), () => {});
    // the worker died and came back (runtime-notice.ts says so): show what now runs, e.g. WASM
    // after a lost WebGPU device; or, when it could not come back, that nothing is loaded
    engine.onStatus((status) => {
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
      // one model at a time: the last one's worker (and its memory) goes first
      const previous = this.model;
      this.model = bundle.url;   // (the test hook's client follows it from the start of the load)
      if (previous) await this.engine.unload(previous).catch(() => {});
      const info = await this.engine.load(bundle.url, { ep, dtype, onProgress: (e) => loader.progress.update(e) });
      this.view.startup.loaded(info);
      this.state.loaded = info;
      this.state.warnings = loadWarnings(info, ep);
      loader.showLoaded(info, ep);
      this.resetConversation();
      this.setStatus('ready');
      this.view.composer.focus();
    } catch (e) {
      const shown = describeError(e);
      this.model = null;
      this.state.lastError = { ...shown, during: 'load' };
      loader.showFailed(shown.message);
      error.show(shown, `Loading ${bundle.label} failed`);
      this.setStatus('idle');
    }
  }

  async send(): Promise<void> {
    const { composer, messages, sampling, schema, stats, error } = this.view;
    const text = composer.value.trim();
    if (this.state.status !== 'ready' || !text) return;
    const options = sampling.read();
    if (!options) return;
    const format = schema.read();
    if (format === null) return;   // the box shows what is wrong with it
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
    const abort = new AbortController();
    this.abort = abort;
    let final: OnnxpipeChatStats | null = null;
    let finish: string | null = null;
    let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
    const calls: ToolCall[] = [];
    try {
      if (!this.model) throw new Error('no model is loaded');
      const stream = await this.engine.chat.completions.create({
        ...chatParams(options), ...(format ? { response_format: format } : {}),
        model: this.model, messages: this.state.messages.map((m) => ({ ...m })),
        stream: true, stream_options: { include_usage: true },
      }, { signal: abort.signal });
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        const token = choice?.delta.content;
        if (token) {
          this.state.streaming += token;
          bubble.append(token);
          stats.onToken(chunk.onnxpipe?.token_ids.length ?? 1);
          this.view.startup.token();
          messages.scrollToEnd();
        }
        if (choice?.finish_reason) {
          finish = choice.finish_reason;
          final = chunk.onnxpipe && 'decode_tokens_per_s' in chunk.onnxpipe ? chunk.onnxpipe : null;
        }
        for (const call of choice?.delta.tool_calls ?? []) {
          if (call.id && call.function?.name !== undefined) calls.push({ id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments ?? '' } });
        }
        if (chunk.usage) usage = chunk.usage;
      }
      const content = this.state.streaming;
      bubble.finish(content, this.stopRequested ? (content ? 'stopped' : 'stopped before any output') : undefined, calls);
      this.state.messages.push({ role: 'assistant', content, ...(calls.length ? { tool_calls: calls } : {}) });
      const result: GenerationResult = {
        tokens: final?.token_ids ?? [], text: content, finish_reason: finish,
        prompt_tokens: usage?.prompt_tokens ?? 0, cached_tokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
        prefill_ms: final?.prefill_ms ?? 0, decode_tokens_per_s: final?.decode_tokens_per_s ?? 0,
        ...(final?.speculative ? { speculative: final.speculative } : {}),
        ...(final?.grammar ? { grammar: final.grammar } : {}),
        ...(calls.length ? { tool_calls: calls } : {}),
      };
      this.state.lastResult = result;
      stats.show(result);
      this.view.startup.done(result.prefill_ms);
    } catch (e) {
      if (abort.signal.aborted && e instanceof Error && e.name === 'AbortError') {
        // Stop: the reply so far stays in the conversation (the worker's cancel lands behind it)
        const content = this.state.streaming;
        bubble.finish(content, content ? 'stopped' : 'stopped before any output');
        this.state.messages.push({ role: 'assistant', content });
        this.state.lastResult = null;
        stats.stopped();
        return;
      }
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
      this.abort = null;
      this.state.streaming = '';
      this.setStatus(this.state.loaded ? 'ready' : 'idle');
      if (this.clearWhenSettled) this.resetConversation();
    }
  }

  async stop(): Promise<void> {
    if (this.state.status !== 'generating') return;
    this.stopRequested = true;
    this.setStatus('stopping');
    // the turn's stream ends at once; the engine cancels the worker's generation within one step
    this.abort?.abort();
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

/** The sampling panel's options as a Chat Completions request (greedy: temperature 0). */
function chatParams(options: SearchOptions): Partial<ChatParams> {
  const params: Partial<ChatParams> = {};
  if (!options.do_sample) params.temperature = 0;
  else if (options.temperature !== undefined) params.temperature = options.temperature;
  if (options.do_sample && options.top_p !== undefined) params.top_p = options.top_p;
  if (options.top_k !== undefined) params.top_k = options.top_k;
  if (options.min_p !== undefined) params.min_p = options.min_p;
  if (options.random_seed !== undefined) params.seed = options.random_seed;
  if (options.repetition_penalty !== undefined) params.repetition_penalty = options.repetition_penalty;
  if (options.max_new_tokens !== undefined) params.max_completion_tokens = options.max_new_tokens;
  if (options.speculative !== undefined) params.speculative = options.speculative;
  return params;
}

/** What the empty conversation says: the next thing to do. */
function emptyText(status: Status, loaded: boolean): string {
  if (status === 'loading') return 'The model is loading. Once it is ready, type a message below.';
  return loaded ? 'The model is ready. Type a message below.' : 'Load a model, then type a message below.';
}
