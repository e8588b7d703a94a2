// Transcribe page entry: drop (or pick) an audio file, or record, and read what the speech
// recogniser heard. One runtime worker with the recogniser bundle, loaded on first use.

import '../styles.css';
import '../voice/voice.css';
import { RuntimeClient } from '../client';
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
    __onnxpipeTranscribe?: { state: TranscribeState; client: RuntimeClient; transcribeFile: (file: File) => Promise<void> };
  }
}

function start(): void {
  const state: TranscribeState = {
    status: 'idle', loaded: null, text: '', audioSeconds: 0, computeSeconds: 0, source: '', lastError: null,
  };
  const client = new RuntimeClient();
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
  mountStoragePanel(root.querySelector('aside.side') ?? root, client);

  const setStatus = (s: TranscribeState['status'], line: string) => {
    state.status = s;
    root.dataset.status = s;
    status.textContent = line;
  };
  let loading: Promise<LoadedInfo> | null = null;
  const ensureLoaded = (): Promise<LoadedInfo> => {
    if (state.loaded) return Promise.resolve(state.loaded);
    progress.reset();
    loading ??= client.load(bundleUrl(DEFAULT_BUNDLES.asr), { ep: 'wasm', onProgress: (e) => progress.update(e) })
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

  const transcribe = async (samples: Float32Array, rate: number, source: string) => {
    error.clear();
    state.lastError = null;
    try {
      setStatus('loading', 'Loading the recogniser…');
      await ensureLoaded();
      setStatus('transcribing', `Transcribing ${(samples.length / rate).toFixed(1)} s of ${source}…`);
      text.textContent = '';
      // each 30-second window shows as soon as it is done
      const result = await client.transcribe(samples, rate, (window) => {
        text.textContent = `${text.textContent ?? ''} ${window.text}`.trim();
      });
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
      const audio = await decodeAudioFile(await file.arrayBuffer());
      await transcribe(audio.samples, audio.sampleRate, file.name);
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
    void transcribe(samples, CAPTURE_RATE, 'your recording, cut short').then(() => {
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
    void transcribe(samples, CAPTURE_RATE, 'your recording');
  });
  window.__onnxpipeTranscribe = { state, client, transcribeFile };
}

start();
