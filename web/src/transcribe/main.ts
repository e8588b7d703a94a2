// Transcribe page entry: drop (or pick) an audio file, or record, and read what the speech
// recogniser heard. The public engine (web/src/engine, what the npm package ships) with the
// recogniser bundle, loaded on first use; the text streams window by window.

import '../styles.css';
import '../voice/voice.css';
import type { RuntimeClient } from '../client';
import { Engine, engineClient } from '../engine/engine';
import { wavBytes } from '../audio/wav';
import { enableOffline } from '../offline';
import { mountBuildFooter } from '../app/build-info';
import { bundleUrl } from '../ui/bundles';
import { el } from '../ui/dom';
import { ErrorBanner } from '../ui/error-banner';
import { describeError, formatMs, type ShownError } from '../ui/format';
import { ProgressView } from '../ui/progress';
import { CAPTURE_RATE } from '../audio/capture-protocol';
import { decodeAudioFile } from '../audio/decode';
import { MicError } from '../audio/mic';
import { Recorder } from '../audio/recorder';
import type { LoadedInfo } from '../protocol';
import { DEFAULT_BUNDLES } from '../voice/models';
import { mountStoragePanel } from '../storage/panel';

export interface TranscribeState {
  status: 'idle' | 'loading' | 'recording' | 'transcribing' | 'done' | 'failed';
  loaded: LoadedInfo | null;
  /** The last transcription: its text and figures. */
  text: string;
  audioSeconds: number;
  computeSeconds: number;
  source: string;
  lastError: ShownError | null;
}

declare global {
  interface Window {
    /** Test hooks; ``client``: the engine's RuntimeClient for the recogniser (or its runtime before the load). */
    __onnxpipeTranscribe?: { state: TranscribeState; client: RuntimeClient | null; transcribeFile: (file: File) => Promise<void> };
  }
}

function start(): void {
  const state: TranscribeState = {
    status: 'idle', loaded: null, text: '', audioSeconds: 0, computeSeconds: 0, source: '', lastError: null,
  };
  // no runtime starts before the first use (no boot): the storage panel's listing starts a worker only
  const engine = new Engine({ ep: 'wasm' }, null);
  const asr = bundleUrl(DEFAULT_BUNDLES.asr);
  const recorder = new Recorder();
  const progress = new ProgressView();
  const error = new ErrorBanner();
  error.root.dataset.testid = 'transcribe-error';
  const fileInput = el('input', { type: 'file', accept: 'audio/*,.wav', 'data-testid': 'transcribe-file' });
  const drop = el('div', { class: 'transcribe-drop', 'data-testid': 'transcribe-drop' },
    el('p', { text: 'Drop a WAV (or any audio file) here, or ' }), fileInput);
  const record = el('button', { type: 'button', class: 'primary', 'data-testid': 'transcribe-record', text: 'Record' });
  const status = el('p', { class: 'voice-status', 'data-testid': 'transcribe-status', role: 'status', text: 'Drop a file or press Record.' });
  const text = el('p', { class: 'transcribe-text', 'data-testid': 'transcribe-text', 'aria-live': 'polite' });
  const figures = el('p', { class: 'stats', 'data-testid': 'transcribe-stats' });
  const model = el('p', { class: 'load-status', 'data-testid': 'transcribe-model', text: `${DEFAULT_BUNDLES.asr}: loaded on first use` });
  const root = el('div', { class: 'app voice-app', 'data-testid': 'app' },
    el('header', { class: 'app-header' },
      el('h1', { text: 'onnxpipe transcribe' }),
      el('p', { class: 'tagline', text: 'Speech to text with Whisper, running in your browser' })),
    el('div', { class: 'app-body' },
      el('main', { class: 'voice' }, error.root, drop, el('div', { class: 'voice-buttons' }, record), status, text, figures),
      el('aside', { class: 'side' }, el('section', { class: 'loader' }, el('h2', { text: 'Recogniser' }), model, progress.root))));
  const mount = document.getElementById('app') ?? document.body.appendChild(el('div', { id: 'app' }));
  mount.replaceChildren(root);
  enableOffline();
  mountBuildFooter();
  mountStoragePanel(root.querySelector('aside.side') ?? root, engine.storage);

  const setStatus = (s: TranscribeState['status'], line: string) => {
    state.status = s;
    root.dataset.status = s;
    status.textContent = line;
  };
  let loading: Promise<LoadedInfo> | null = null;
  const ensureLoaded = (): Promise<LoadedInfo> => {
    if (state.loaded) return Promise.resolve(state.loaded);
    progress.reset();
    loading ??= engine.load(asr, { ep: 'wasm', onProgress: (e) => progress.update(e) })
      .then((info) => {
        progress.finish(true);
        model.textContent = `${info.bundle}: loaded in ${formatMs(info.load_ms)}`;
        state.loaded = info;
        return info;
      }, (e: unknown) => {
        progress.finish(false);
        loading = null;
        throw e;
      });
    return loading;
  };

  /** ``audio``: the file as dropped, or a recording as WAV; ``seconds`` its length. */
  const transcribe = async (audio: Blob, seconds: number, source: string) => {
    error.clear();
    state.lastError = null;
    try {
      setStatus('loading', 'Loading the recogniser…');
      await ensureLoaded();
      setStatus('transcribing', `Transcribing ${seconds.toFixed(1)} s of ${source}…`);
      text.textContent = '';
      // each 30-second window shows as soon as it is done
      let heard = '';
      let result: { text: string; audio_seconds: number; compute_seconds: number } | null = null;
      for await (const event of await engine.audio.transcriptions.create({ model: asr, file: audio, stream: true })) {
        if (event.type === 'transcript.text.delta') {
          heard += event.delta;
          text.textContent = heard.trim();
        } else {
          result = { text: event.text, ...event.onnxpipe };
        }
      }
      if (!result) throw new Error('the transcription ended without its text');
      Object.assign(state, { text: result.text, audioSeconds: result.audio_seconds, computeSeconds: result.compute_seconds, source });
      text.textContent = result.text;
      const rtf = result.compute_seconds > 0 ? result.audio_seconds / result.compute_seconds : 0;
      figures.textContent = `${result.audio_seconds.toFixed(2)} s of audio in ${formatMs(result.compute_seconds * 1000)} · ${rtf.toFixed(2)}x real time`;
      setStatus('done', `Done: ${source}.`);
    } catch (e) {
      state.lastError = describeError(e);
      error.show(state.lastError, 'Transcribing failed');
      setStatus('failed', 'Failed.');
    }
  };

  const transcribeFile = async (file: File) => {
    setStatus('loading', `Reading ${file.name}…`);
    try {
      // read here too: a file that is not audio is said so before any model loads
      const audio = await decodeAudioFile(await file.arrayBuffer());
      await transcribe(file, audio.samples.length / audio.sampleRate, file.name);
    } catch (e) {
      state.lastError = describeError(e);
      error.show(state.lastError, `Reading ${file.name} failed`);
      setStatus('failed', 'Failed.');
    }
  };

  fileInput.addEventListener('change', () => {
    const file = fileInput.files?.[0];
    if (file) void transcribeFile(file);
  });
  drop.addEventListener('dragover', (event) => {
    event.preventDefault();
    drop.dataset.over = 'true';
  });
  drop.addEventListener('dragleave', () => delete drop.dataset.over);
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    delete drop.dataset.over;
    const file = event.dataTransfer?.files[0];
    if (file) void transcribeFile(file);
  });
  const startRecording = async () => {
    error.clear();
    state.lastError = null;
    record.disabled = true;
    status.textContent = 'Opening the microphone…';
    try {
      // the microphone first: nothing is downloaded for a recording that cannot be made
      await recorder.start();
    } catch (e) {
      state.lastError = e instanceof MicError ? e.advice('press Record') : describeError(e);
      error.show(state.lastError, 'The microphone could not start');
      setStatus('failed', e instanceof MicError ? `Not recording: ${e.problem}. A dropped file still works.` : 'Failed.');
      return;
    } finally {
      record.disabled = false;
    }
    // the recogniser loads while the user speaks
    void ensureLoaded().catch(() => undefined);
    record.textContent = 'Stop and transcribe';
    setStatus('recording', 'Recording… press again to transcribe.');
  };
  // the microphone went away mid-recording: what was recorded is still transcribed
  recorder.mic.onLost = (lost) => {
    if (!recorder.recording) return;
    record.textContent = 'Record';
    const samples = recorder.stop();
    void transcribe(recording(samples), samples.length / CAPTURE_RATE, 'your recording, cut short').then(() => {
      if (!state.lastError) error.show(lost.advice('press Record'), 'The recording stopped');
    });
  };
  record.addEventListener('click', () => {
    if (!recorder.recording) {
      void startRecording();
      return;
    }
    record.textContent = 'Record';
    const samples = recorder.stop();
    void transcribe(recording(samples), samples.length / CAPTURE_RATE, 'your recording');
  });
  const hooks = { state, transcribeFile };
  window.__onnxpipeTranscribe = Object.defineProperty(hooks, 'client', { get: () => engineClient(engine, asr), enumerable: true }) as typeof hooks & { client: RuntimeClient | null };
}

/** A recording (mono floats at the capture rate) as the WAV file the engine takes. */
function recording(samples: Float32Array): Blob {
  return new Blob([wavBytes(samples, CAPTURE_RATE)], { type: 'audio/wav' });
}

start();
