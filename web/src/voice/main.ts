// Voice chat page entry: builds the DOM, the four model slots (one runtime worker each) and
// the controller.

import '../styles.css';
import './voice.css';
import { enableOffline } from '../offline';
import { mountBuildFooter } from '../app/build-info';
import { asListed, listBundles, bundleUrl, type BundleEntry } from '../ui/bundles';
import { el } from '../ui/dom';
import { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import { mountStoragePanel } from '../storage/panel';
import { Conversation } from './conversation';
import { VoiceControls } from './controls';
import { VoiceController, type VoiceView } from './controller';
import { LatencyView } from './latency-view';
import { LevelMeter } from './level-meter';
import { DEFAULT_BUNDLES, ModelSet, type Role } from './models';
import { threadsFromQuery } from './threads';
import { initialState, type VoiceState } from './state';
import { StatusLine } from './status';

declare global {
  interface Window {
    /** Test hooks: the page state (mutated in place) and the controller. */
    __onnxpipeVoice?: { state: VoiceState; controller: VoiceController | null; view: VoiceView };
  }
}

/** Kokoro's bundle sits next to the Piper voice in the picker even when index.json omits it. */
const KOKORO = 'kokoro-82m';

/** The voices, labelled as index.json labels them (the names below only when it does not list them). */
async function voiceBundles(): Promise<BundleEntry[]> {
  const listed = (await listBundles('speech')).filter((b) => b.kind === 'speech');
  const piper = asListed({ name: DEFAULT_BUNDLES.voice, label: 'Piper en-US joe', url: bundleUrl(DEFAULT_BUNDLES.voice) }, listed);
  const kokoro = asListed({ name: KOKORO, label: 'Kokoro-82M', url: bundleUrl(KOKORO) }, listed);
  const out = [piper, ...listed.filter((b) => b.name !== piper.name)];
  if (!out.some((b) => b.name === KOKORO)) out.push(kokoro);
  return out;
}

function start(): void {
  const state = initialState();
  let controller: VoiceController | null = null;
  const controls = new VoiceControls({
    start: () => void controller?.start(),
    stop: () => void controller?.stop(),
    talkDown: () => controller?.talkDown(),
    talkUp: () => void controller?.talkUp(),
    voiceChanged: () => void controller?.voiceChanged(),
    modeChanged: () => controller?.modeChanged(),
  });
  // WASM threads per model from the address (``?threads=2``, ``&asr_threads=1``: models.ts
  // THREAD_PLAN; the benchmark measures 1 and 2); a bad value is shown, and nothing starts
  let threads: Record<Role, number> | undefined;
  let refused: unknown = null;
  try {
    threads = threadsFromQuery(location.search);
  } catch (e) {
    refused = e;
  }
  const models = new ModelSet(threads);
  const meter = new LevelMeter();
  const conversation = new Conversation();
  const latency = new LatencyView();
  const status = new StatusLine();
  const error = new ErrorBanner();
  error.root.dataset.testid = 'voice-error';
  const root = el('div', { class: 'app voice-app', 'data-testid': 'app', 'data-phase': 'off' },
    el('header', { class: 'app-header' },
      el('h1', { text: 'onnxpipe voice chat' }),
      el('p', { class: 'tagline', text: 'Talk to a small model: listening, transcribing, answering and speaking all run in your browser' })),
    el('div', { class: 'app-body' },
      el('main', { class: 'voice' }, error.root, status.root, meter.root, conversation.root, latency.root),
      el('aside', { class: 'side' }, controls.root, models.root)));
  const view: VoiceView = { root, controls, models, meter, conversation, latency, status, error };
  const mount = document.getElementById('app') ?? document.body.appendChild(el('div', { id: 'app' }));
  mount.replaceChildren(root);

  enableOffline();
  mountBuildFooter();
  try {
    if (refused) throw refused;
    controller = new VoiceController(state, view);
  } catch (e) {
    error.show(describeError(e), 'The runtime workers could not start');
  }
  window.__onnxpipeVoice = { state, controller, view };
  mountStoragePanel(root.querySelector('aside.side') ?? root, models.engine.storage);
  void voiceBundles().then((bundles) => controls.setVoiceBundles(bundles));
}

start();
