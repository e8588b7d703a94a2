// Speech page entry: builds the DOM, starts the runtime worker client, wires the controller.

import '../styles.css';
import { RuntimeClient } from '../client';
import { RuntimeNotice } from '../runtime-notice';
import { enableOffline } from '../offline';
import { mountBuildFooter } from '../app/build-info';
import { el } from '../ui/dom';
import { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import { LoaderPanel } from '../ui/loader';
import { VoiceControls } from './controls';
import { TtsController, type TtsView } from './controller';
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
    /** Test hooks: the live client and the page state (mutated in place). */
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
    let client: RuntimeClient | null = null;
    try {
      client = new RuntimeClient();
      controller = new TtsController(client, state, view);
      controller.setStatus('idle');
    } catch (e) {
      view.error.show(describeError(e), 'The runtime worker could not start');
      view.loader.setBusy(true, false);
    }
    window.__onnxpipeTts = { client, state, controller };
    if (client) mountStoragePanel(view.root.querySelector('aside.side') ?? view.root, client);
    if (client) view.error.root.before(new RuntimeNotice(client).root);   // the worker died / healed
    view.loader.setBundles(await voices);
    if (controller) controller.setStatus(state.status);
  })();
}

start();
