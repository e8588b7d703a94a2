// Chat page entry: builds the DOM, starts the engine (web/src/engine, the npm package's own
// code: the page runs what the package ships), wires the controller.

import '../styles.css';
import type { RuntimeClient } from '../client';
import { type Engine, engineClient, startEngine } from '../engine/engine';
import { enableOffline } from '../offline';
import { mountBuildFooter } from '../app/build-info';
import { listBundles } from '../ui/bundles';
import { Composer } from './composer';
import { ChatController, type ChatView } from './controller';
import { el } from '../ui/dom';
import { ErrorBanner } from '../ui/error-banner';
import { describeError } from '../ui/format';
import { LoaderPanel } from '../ui/loader';
import { MessageList } from './messages';
import { SamplingControls } from './sampling';
import { SchemaBox } from './schema';
import { initialState, type ChatState } from './state';
import { StartupLine } from './startup';
import { StatsLine } from './stats';
import { mountStoragePanel } from '../storage/panel';
import { RuntimeNotice } from '../runtime-notice';

declare global {
  interface Window {
    /** Test hooks: the page state (mutated in place); ``client``: the engine's RuntimeClient for
     * the model the page loaded, or before any its booted runtime (tests drive it directly). */
    __onnxpipe?: {
      client: RuntimeClient | null; state: ChatState; controller: ChatController | null; engine?: Engine | null;
      /** the conversation's view (tests render a reply through it, e.g. one with tool calls) */
      messages?: MessageList;
    };
  }
}

function buildView(actions: {
  load: () => void; send: () => void; stop: () => void; newChat: () => void;
}): ChatView {
  const loader = new LoaderPanel(actions.load);
  const messages = new MessageList();
  const composer = new Composer(actions);
  const sampling = new SamplingControls();
  const schema = new SchemaBox();
  const stats = new StatsLine();
  const startup = new StartupLine();
  const error = new ErrorBanner();
  const root = el('div', { class: 'app', 'data-testid': 'app', 'data-status': 'idle' },
    el('header', { class: 'app-header' },
      el('h1', { text: 'onnxpipe chat' }),
      el('p', { class: 'tagline', text: 'A generative ONNX pipeline running in your browser' })),
    el('div', { class: 'app-body' },
      el('main', { class: 'chat' }, error.root, messages.root, stats.root, startup.root, composer.root),
      el('aside', { class: 'side' }, loader.root, sampling.root, schema.root)));
  return { root, loader, messages, composer, sampling, schema, stats, startup, error };
}

function start(): void {
  const state = initialState();
  let controller: ChatController | null = null;
  const view = buildView({
    load: () => void controller?.load(),
    send: () => void controller?.send(),
    stop: () => void controller?.stop(),
    newChat: () => controller?.newChat(),
  });
  const mount = document.getElementById('app') ?? document.body.appendChild(el('div', { id: 'app' }));
  mount.replaceChildren(view.root);

  // the service worker precaches the site by itself: the runtime worker need not wait for it
  enableOffline();
  mountBuildFooter();
  const bundles = listBundles('text');
  void (async () => {
    let engine: Engine | null = null;
    try {
      const started = startEngine({ ep: 'wasm' });
      engine = started.engine;
      controller = new ChatController(engine, started.booted, state, view);
      controller.setStatus('idle');
    } catch (e) {
      view.error.show(describeError(e), 'The runtime worker could not start');
      view.loader.setBusy(true, false);
    }
    const hooks = { state, controller, engine, messages: view.messages };
    window.__onnxpipe = Object.defineProperty(hooks, 'client', {
      get: () => (engine ? engineClient(engine, controller?.model ?? null) : null), enumerable: true,
    }) as typeof hooks & { client: RuntimeClient | null };
    if (engine) mountStoragePanel(view.root.querySelector('aside.side') ?? view.root, engine.storage);
    if (engine) view.error.root.before(new RuntimeNotice(engine).root);   // a worker died / healed
    view.loader.setBundles(await bundles);
    if (controller) controller.setStatus(state.status);
  })();
}

start();
