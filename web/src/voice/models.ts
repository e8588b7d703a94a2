// The four models of a voice chat on one engine (web/src/engine, what the npm package ships),
// one runtime worker each, so listening, transcribing, writing and speaking never wait on one
// another's worker:
//   vad    voice activity (streaming, fed straight from the microphone worklet)
//   asr    speech recognition
//   llm    the chat model
//   voice  text to speech (the voice picker swaps this one)

import type { RuntimeClient, RuntimeStatus } from '../client';
import { Engine, engineClient } from '../engine/engine';
import { normalize } from '../engine/models';
import { bundleUrl } from '../ui/bundles';
import { el } from '../ui/dom';
import { describeError, formatMs, type ShownError } from '../ui/format';
import { ProgressView } from '../ui/progress';
import type { LoadedInfo } from '../protocol';
import { RuntimeNotice } from '../runtime-notice';

export type Role = 'vad' | 'asr' | 'llm' | 'voice';
export const ROLES: Role[] = ['vad', 'asr', 'llm', 'voice'];

/** The bundle each role opens by default, and the LoadedInfo.kind it must turn out to be. */
export const DEFAULT_BUNDLES: Record<Role, string> = {
  vad: 'silero-vad',
  asr: 'whisper-base',
  llm: 'smollm2-135m-instruct',
  voice: 'piper-en-us-joe',
};
const ROLE_KIND: Record<Role, string> = { vad: 'voice-activity', asr: 'transcription', llm: 'text', voice: 'speech' };
const ROLE_LABEL: Record<Role, string> = {
  vad: 'Voice activity', asr: 'Speech recognition', llm: 'Chat model', voice: 'Voice',
};

export class ModelSlot {
  readonly progress = new ProgressView();
  readonly root: HTMLElement;
  private readonly status: HTMLElement;
  info: LoadedInfo | null = null;
  /** The bundle URL ``info`` is for (a different one must be loaded again). */
  loadedUrl: string | null = null;
  private loading: Promise<LoadedInfo> | null = null;
  private loadingUrl: string | null = null;

  constructor(readonly role: Role, private readonly engine: Engine, readonly threads = 1) {
    this.status = el('p', { class: 'load-status', 'data-testid': `voice-model-${role}`, 'data-state': 'idle', text: 'not loaded' });
    // this model's worker died / healed (the engine reloads the same bundle by itself)
    this.root = el('div', { class: 'voice-model' },
      el('h3', { text: ROLE_LABEL[role] }), this.status, this.progress.root, new RuntimeNotice(this, ROLE_LABEL[role]).root);
    this.onStatus((status) => {
      if (status.state !== 'failed') return;
      // load it again, in a fresh worker, on the next use
      this.info = null;
      const model = this.loadedUrl;
      this.loadedUrl = null;
      if (model && !this.loadingUrl) void this.engine.unload(model).catch(() => undefined);
    });
  }

  /** The model this role runs (its URL, the engine's model id): the one loading, else the one loaded. */
  get model(): string | null {
    return this.loadingUrl ?? this.loadedUrl;
  }

  /** Test hook: the engine's RuntimeClient for this role's model (null before a load). */
  get client(): RuntimeClient | null {
    const model = this.model;
    return model ? engineClient(this.engine, model) : null;
  }

  /** engine.onStatus for this role's model only. */
  onStatus(listener: (status: RuntimeStatus) => void): () => void {
    return this.engine.onStatus((status, model) => {
      const mine = this.model;
      if (mine && model === normalize(mine)) listener(status);
    });
  }

  /** Load ``url`` (once; again only for another URL), on ``threads`` WASM threads (THREAD_PLAN). */
  load(url: string): Promise<LoadedInfo> {
    if (this.info && this.loadedUrl === url) return Promise.resolve(this.info);
    if (this.loading && this.loadingUrl === url) return this.loading;
    this.info = null;
    // the voice picker swaps the voice: the last one's worker goes
    const previous = this.loadedUrl ?? this.loadingUrl;
    if (previous && previous !== url) void this.engine.unload(previous).catch(() => undefined);
    this.loadedUrl = null;
    this.loadingUrl = url;
    this.progress.reset();
    this.status.dataset.state = 'loading';
    this.status.textContent = `loading ${new URL(url).pathname.split('/').filter(Boolean).pop()}…`;
    const load = this.engine.load(url, { ep: 'wasm', threads: this.threads, onProgress: (e) => this.progress.update(e) })
      .then((info) => {
        if (info.kind !== ROLE_KIND[this.role]) {
          throw new Error(`${info.bundle} is a "${info.kind}" bundle; the ${ROLE_LABEL[this.role].toLowerCase()} needs a "${ROLE_KIND[this.role]}" one`);
        }
        if (this.loading !== load) return info; // superseded by a later load
        this.info = info;
        this.loadedUrl = url;
        this.progress.finish(true);
        this.status.dataset.state = 'loaded';
        this.status.textContent = `${info.bundle} · loaded in ${formatMs(info.load_ms)}`;
        return info;
      })
      .catch((error: unknown) => {
        if (this.loading === load) {
          this.progress.finish(false);
          this.status.dataset.state = 'failed';
          this.status.textContent = `failed: ${describeError(error).message}`;
        }
        throw error;
      })
      .finally(() => {
        if (this.loading === load) {
          this.loading = null;
          this.loadingUrl = null;
        }
      });
    this.loading = load;
    return load;
  }
}

export class ModelSet {
  /** ``threads``: WASM threads per model (threadsFromQuery; one each by default: four models
   * share the cores). Nothing starts before the first load. */
  readonly engine: Engine;
  readonly slots: Record<Role, ModelSlot>;
  readonly root: HTMLElement;

  constructor(readonly threads: Record<Role, number> = { vad: 1, asr: 1, llm: 1, voice: 1 }) {
    this.engine = new Engine({ ep: 'wasm', threads: 1 }, null);
    const e = this.engine;
    this.slots = {
      vad: new ModelSlot('vad', e, threads.vad), asr: new ModelSlot('asr', e, threads.asr),
      llm: new ModelSlot('llm', e, threads.llm), voice: new ModelSlot('voice', e, threads.voice),
    };
    this.root = el('section', { class: 'voice-models loader', 'aria-label': 'Models' },
      el('h2', { text: 'Models' }), ...ROLES.map((r) => this.slots[r].root));
  }

  /** Load every role's bundle in parallel (``voiceUrl`` for the voice). Rejects with the
   * first failure, naming the role. */
  async loadAll(voiceUrl: string): Promise<void> {
    const urls: Record<Role, string> = {
      vad: bundleUrl(DEFAULT_BUNDLES.vad), asr: bundleUrl(DEFAULT_BUNDLES.asr), llm: bundleUrl(DEFAULT_BUNDLES.llm), voice: voiceUrl,
    };
    const results = await Promise.allSettled(ROLES.map((r) => this.slots[r].load(urls[r])));
    const failed = results.findIndex((r) => r.status === 'rejected');
    if (failed >= 0) {
      const shown: ShownError = describeError((results[failed] as PromiseRejectedResult).reason);
      throw new ModelLoadError(ROLES[failed], shown);
    }
  }

  info(role: Role): LoadedInfo | null {
    return this.slots[role].info;
  }
}

export class ModelLoadError extends Error {
  constructor(readonly role: Role, readonly shown: ShownError) {
    super(`${ROLE_LABEL[role]}: ${shown.message}`);
    this.name = 'ModelLoadError';
  }

  /** The role's name on the page (e.g. "Speech recognition"). */
  get label(): string {
    return ROLE_LABEL[this.role];
  }
}
