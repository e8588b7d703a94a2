// Speech page entry: builds the DOM, makes the engine (web/src/engine, what the npm package
// ships; its runtime starts with the first load), wires the controller.

import '../styles.css';
import type { RuntimeClient } from '../client';
import { Engine, engineClient } from '../engine/engine';
import { RuntimeNotice } from '../runtime-notice';
import { enableOffline } from '../offline';
import { mountBuildFooter } from '../app/build-info';
import { el } from '../ui/dom';
import { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import { LoaderPanel } from '../ui/loader';
import { VoiceControls } from './controls';
import { TtsController, type TtsView, voiceThreads } from './controller';
import { WavDownload } from './download';
import { SentenceList } from './sentences';
import { SpeechForm } from './speech-form';
import { initialState, type TtsState } from './state';
import { SpeechStats } from './stats';
import { StatusLine } from './status';
import { listVoices } from './voices';
import { Waveform } from './waveform';
import { mountStoragePanel } from '../storage/panel';

declare global {
  interface Window {
    /** Test hooks: the page state (mutated in place); ``client``: the engine's RuntimeClient for
     * the voice the page loaded, or before any the worker the first load will use. */
    __onnxpipeTts?: { client: RuntimeClient | null; state: TtsState; controller: TtsController | null };
  }
}

function buildView(actions: { load: () => void; speak: () => void; play: () => void; stop: () => void }): TtsView {
  const loader = new LoaderPanel(actions.load);
  const download = new WavDownload();
  const form = new SpeechForm(actions, download.root);
  const controls = new VoiceControls();
  const waveform = new Waveform();
  const stats = new SpeechStats();
  const sentences = new SentenceList();
  const status = new StatusLine();
  const error = new ErrorBanner();
  // the shared banner's test id is the chat's; this page's tests look for tts-error
  error.root.dataset.testid = 'tts-error';
  const root = el('div', { class: 'app tts-app', 'data-testid': 'app', 'data-status': 'idle' },
    el('header', { class: 'app-header' },
      el('h1', { text: 'onnxpipe speech' }),
      el('p', { class: 'tagline', text: 'Text to speech with an ONNX voice, running in your browser' })),
    el('div', { class: 'app-body' },
      el('main', { class: 'tts' }, error.root, form.root, status.root, stats.root, waveform.root, sentences.root),
      el('aside', { class: 'side' }, loader.root, controls.root)));
  return { root, loader, form, controls, waveform, stats, sentences, status, download, error };
}

function start(): void {
  const state = initialState();
  let controller: TtsController | null = null;
  const view = buildView({
    load: () => void controller?.load(),
    speak: () => void controller?.speak(),
    play: () => controller?.play(),
    stop: () => void controller?.stop(),
  });
  const mount = document.getElementById('app') ?? document.body.appendChild(el('div', { id: 'app' }));
  mount.replaceChildren(view.root);

  // the service worker precaches the site by itself: the runtime worker need not wait for it
  enableOffline();
  mountBuildFooter();
  const voices = listVoices();
  void (async () => {
    let engine: Engine | null = null;
    try {
      engine = new Engine({ threads: voiceThreads() }, null);
      engineClient(engine, null, true);   // the worker starts now, as the page's client did (no boot)
      controller = new TtsController(engine, state, view);
      controller.setStatus('idle');
    } catch (e) {
      view.error.show(describeError(e), 'The runtime worker could not start');
      view.loader.setBusy(true, false);
    }
    const hooks = { state, controller };
    window.__onnxpipeTts = Object.defineProperty(hooks, 'client', {
      get: () => (engine ? engineClient(engine, controller?.model ?? null, true) : null), enumerable: true,
    }) as typeof hooks & { client: RuntimeClient | null };
    if (engine) mountStoragePanel(view.root.querySelector('aside.side') ?? view.root, engine.storage);
    if (engine) view.error.root.before(new RuntimeNotice(engine).root);   // a worker died / healed
    view.loader.setBundles(await voices);
    if (controller) controller.setStatus(state.status);
  })();
}

start();
