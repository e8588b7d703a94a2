// The speech page's behaviour: load a voice, speak text (playing sentences as they arrive),
// stop, play again. The UI pieces only render.

import { RuntimeError } from '../client';
import type { Engine } from '../engine/engine';
import { cancelledSpeech } from '../audio/wav';
import type { SentenceInfo, SpeechResult } from '../protocol';
import type { ErrorBanner } from '../ui/error-banner';
import { describeError, formatMs } from '../ui/format';
import type { LoaderPanel } from '../ui/loader';
import { loadWarnings } from '../ui/loader';
import type { VoiceControls } from './controls';
import type { WavDownload } from './download';
import { Player } from './player';
import type { SentenceList } from './sentences';
import type { SpeechForm } from './speech-form';
import type { TtsState, Status } from './state';
import type { SpeechStats } from './stats';
import type { StatusLine } from './status';
import { Take } from './take';
import type { Waveform } from './waveform';

export interface TtsView {
  root: HTMLElement;
  loader: LoaderPanel;
  form: SpeechForm;
  controls: VoiceControls;
  waveform: Waveform;
  stats: SpeechStats;
  sentences: SentenceList;
  status: StatusLine;
  download: WavDownload;
  error: ErrorBanner;
}

/** WASM threads for a voice: the Piper voice needs two to run well above real time on two
 * cores; threads need SharedArrayBuffer, so only where the page is cross-origin isolated. */
export function voiceThreads(): number {
  if (!self.crossOriginIsolated) return 1;
  return Math.max(1, Math.min(2, navigator.hardwareConcurrency || 1));
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export class TtsController {
  readonly take = new Take();
  private readonly player = new Player();
  /** Set by Stop: sentences of the running speech that arrive later are kept but not played. */
  private muted = false;
  private frame = 0;
  /** performance.now() of the running speech's Speak, and whether its audio was heard yet. */
  private spokeAt = 0;
  private heard = true;
  /** The voice the page loaded (its bundle URL, the engine's model id), else null. */
  model: string | null = null;
  /** Aborts the running speech (Stop). */
  private abort: AbortController | null = null;

  constructor(
    private readonly engine: Engine,
    readonly state: TtsState,
    private readonly view: TtsView,
  ) {
    this.player.onChange = (playing) => {
      this.state.playing = playing;
      this.view.root.dataset.playing = String(playing);
      if (playing) this.followPlayhead();
      this.syncForm();
    };
    this.player.onError = (e) => {
      const shown = describeError(e);
      this.state.lastError = { ...shown, during: 'playback' };
      this.view.error.show(shown, 'Audio playback is unavailable');
    };
    view.waveform.show(this.take);
  }

  async load(): Promise<void> {
    const { loader, error, controls, status } = this.view;
    const bundle = loader.bundle;
    if (!bundle || (this.state.status !== 'idle' && this.state.status !== 'ready')) return;
    const ep = loader.ep;
    const threads = voiceThreads();
    this.player.stop();
    // Load is a click too: start the audio output now, not on the first Speak (~0.1-0.3 s)
    this.player.prepare();
    error.clear();
    Object.assign(this.state, { bundle: bundle.name, ep, threads, loaded: null, warnings: [], lastError: null });
    this.setStatus('loading');
    status.set('idle', `Loading ${bundle.label}…`);
    loader.showLoading(bundle, ep);
    try {
      // one voice at a time: the last one's worker (and its memory) goes first
      const previous = this.model;
      this.model = bundle.url;   // (the test hook's client follows it from the start of the load)
      if (previous) await this.engine.unload(previous).catch(() => {});
      const info = await this.engine.load(bundle.url, { ep, onProgress: (e) => loader.progress.update(e) });
      if (info.kind !== 'speech') {
        throw new RuntimeError('bundle', `${info.bundle} is a ${info.kind ?? 'text'} bundle, not a voice: open it on the chat page`);
      }
      this.state.loaded = info;
      this.state.warnings = loadWarnings(info, ep);
      loader.showLoaded(info, ep);
      controls.setControls(info.controls);
      this.setStatus('ready');
      status.set('ready', `Ready: ${info.bundle}, ${info.sample_rate ?? '?'} Hz, ${plural(threads, 'thread')}, ` +
        `loaded in ${formatMs(info.load_ms)}.`);
      this.view.form.focus();
    } catch (e) {
      const shown = describeError(e);
      if (this.model === bundle.url && !this.state.loaded) {
        await this.engine.unload(bundle.url).catch(() => {});
        this.model = null;
      }
      this.state.lastError = { ...shown, during: 'load' };
      loader.showFailed(shown.message);
      controls.setControls([]);
      error.show(shown, `Loading ${bundle.label} failed`);
      status.set('failed', 'No voice loaded.');
      this.setStatus('idle');
    }
  }

  async speak(): Promise<void> {
    const { form, controls, error, status, stats, sentences, download, waveform } = this.view;
    if (this.state.status !== 'ready') return;
    const text = form.value.trim();
    if (!text) {
      status.set('ready', 'Type some text to speak.');
      form.focus();
      return;
    }
    const values = controls.read();
    if (!values) return;
    this.spokeAt = performance.now();
    // before any await: browsers only let audio start inside the click
    this.muted = !this.player.prepare();
    this.player.begin();
    error.clear();
    this.take.clear();
    waveform.update();
    stats.clear();
    sentences.clear();
    download.clear();
    Object.assign(this.state, { sentences: [], samples: 0, lastResult: null, wavBytes: 0, lastError: null,
      firstAudioMs: null, events: [] });
    this.heard = false;
    this.setStatus('speaking');
    status.set('speaking', 'Speaking…');
    try {
      const onAudio = (samples: Float32Array, sampleRate: number, sentence: SentenceInfo) => {
        const arrived = performance.now();
        this.state.events.push({ type: 'audio', at: arrived, index: this.state.sentences.length });
        this.take.add(samples, sampleRate);
        this.state.sentences.push(sentence);
        this.state.samples = this.take.length;
        const wait = this.muted ? null : this.player.enqueue(samples, sampleRate);
        if (this.state.firstAudioMs === null) {
          // heard after the player's lead (Web Audio time); just the arrival where nothing plays
          this.state.firstAudioMs = arrived - this.spokeAt + Math.max(0, wait ?? 0) * 1000;
          stats.showFirstAudio(this.state.firstAudioMs);
        }
        waveform.update();
        sentences.add(sentence);
        stats.onSentences(this.state.sentences);
        if (this.state.status === 'speaking') {
          status.set('speaking', `Speaking… ${plural(this.state.sentences.length, 'sentence')} ready.`);
        }
        this.syncForm();
      };
      const abort = new AbortController();
      this.abort = abort;
      const parts: { samples: Float32Array; sentence: SentenceInfo }[] = [];
      let spoken: { result: SpeechResult; wav: Uint8Array } | null = null;
      try {
        if (!this.model) throw new RuntimeError('input', 'no voice is loaded');
        const events = await this.engine.audio.speech.create({ model: this.model, input: text, controls: values, stream_format: 'sse' }, { signal: abort.signal });
        for await (const event of events) {
          if (event.type === 'speech.audio.delta') {
            parts.push({ samples: event.onnxpipe.samples, sentence: event.onnxpipe.sentence });
            onAudio(event.onnxpipe.samples, event.onnxpipe.sample_rate, event.onnxpipe.sentence);
          } else {
            spoken = event.onnxpipe;
          }
        }
      } catch (e) {
        if (!(abort.signal.aborted && e instanceof Error && e.name === 'AbortError')) throw e;
        // Stop: what was made, as a cancelled speech (the worker's cancel lands behind it)
        const { wav, ...result } = cancelledSpeech(parts, this.take.sampleRate || this.state.loaded?.sample_rate || 0);
        spoken = { result, wav };
      } finally {
        this.abort = null;
      }
      if (!spoken) throw new RuntimeError('internal', 'the speech ended without its result');
      const { result, wav } = spoken;
      this.state.events.push({ type: 'done', at: performance.now() });
      this.state.lastResult = result;
      this.state.wavBytes = wav.length;
      stats.show(result);
      download.set(wav);
      const made = `${plural(result.sentences.length, 'sentence')}, ${result.audio_seconds.toFixed(2)} s of audio`;
      if (result.finish_reason === 'cancelled') status.set('cancelled', `Stopped: ${made}.`);
      else status.set('done', `Done: ${made} in ${result.compute_seconds.toFixed(2)} s.`);
    } catch (e) {
      const shown = describeError(e);
      this.state.lastError = { ...shown, during: 'speak' };
      error.show(shown, 'Speaking failed');
      status.set('failed', `Failed after ${plural(this.state.sentences.length, 'sentence')}.`);
    } finally {
      this.setStatus(this.state.loaded ? 'ready' : 'idle');
    }
  }

  /** Play the last speech again from the start. */
  play(): void {
    if (this.state.status !== 'ready' || this.take.length === 0) return;
    if (!this.player.prepare()) return;
    this.player.begin();
    for (const chunk of this.take.chunks) this.player.enqueue(chunk, this.take.sampleRate);
  }

  /** Stop playback now, and the running speech between sentences. */
  async stop(): Promise<void> {
    this.player.stop();
    if (this.state.status !== 'speaking') return;
    this.muted = true;
    this.setStatus('stopping');
    this.view.status.set('stopping', 'Stopping…');
    // the speech's stream ends at once; the engine cancels the worker's between sentences
    this.abort?.abort();
  }

  /** Apply the status to every control, and to data-status on the app root for tests. */
  setStatus(status: Status): void {
    this.state.status = status;
    this.view.root.dataset.status = status;
    const loaded = this.state.loaded !== null;
    const busy = status === 'speaking' || status === 'stopping';
    this.view.loader.setBusy(status === 'loading' || busy, loaded);
    this.view.controls.setDisabled(!loaded || status === 'loading');
    this.syncForm();
  }

  private syncForm(): void {
    this.view.form.setMode({
      canSpeak: this.state.status === 'ready',
      speaking: this.state.status === 'speaking',
      playing: this.state.playing,
      hasTake: this.take.length > 0,
    });
  }

  /** Move the waveform's playhead every frame while something plays. */
  private followPlayhead(): void {
    if (this.frame) return;
    const tick = () => {
      const at = this.player.position();
      if (!this.heard && at !== null && at > 0) {
        this.heard = true;
        this.state.events.push({ type: 'heard', at: performance.now() });
      }
      this.view.waveform.setPlayhead(at);
      this.frame = at === null ? 0 : requestAnimationFrame(tick);
    };
    this.frame = requestAnimationFrame(tick);
  }
}
