// embed.html: the frame behind one <onnxpipe-chat>/<onnxpipe-speak> element. It runs the
// public engine (web/src/engine, what the npm package ships) on onnxpipe's own origin, so the
// host page can reach neither the runtime worker nor this origin's stored models; it takes
// requests only from its parent window on the parent's origin and answers only there.

import type { SentenceInfo } from '../protocol';
import { type Engine, createEngine } from '../engine/engine';
import { InputError } from '../engine/errors';
import { cancelledSpeech } from '../audio/wav';
import type { FrameMessage, HostMessage, Untagged, WidgetKind } from '../widget/protocol';
import { describeStatus } from '../runtime-notice';
import { TAG, fromParent } from './messages';
import { EmbedError, parentOrigin } from './parent';
import { widgetThreads } from './threads';

/** Counters a test reads through the frame (Playwright): what was refused, what ran. */
interface EmbedStats {
  parentOrigin: string | null;
  accepted: number;
  rejected: number;
  runtimeRequests: number;
}
const stats: EmbedStats = { parentOrigin: null, accepted: 0, rejected: 0, runtimeRequests: 0 };
(window as unknown as { __onnxpipeEmbed: EmbedStats }).__onnxpipeEmbed = stats;

function start(): void {
  const status = document.getElementById('embed-status');
  const kind = new URLSearchParams(location.search).get('kind') as WidgetKind | null;
  let origin: string;
  try {
    origin = parentOrigin();
    if (kind !== 'chat' && kind !== 'speak') throw new EmbedError(`embed.html?kind=${kind}: expected chat or speak`);
  } catch (e) {
    if (status) status.textContent = (e as Error).message;
    return;
  }
  stats.parentOrigin = origin;
  const post = (message: Untagged<FrameMessage>, transfer: Transferable[] = []): void =>
    window.parent.postMessage({ ...message, onnxpipe: TAG }, { targetOrigin: origin, transfer });
  const fail = (id: number | null, e: unknown): void => {
    const kind_ = e instanceof Error && typeof (e as { kind?: unknown }).kind === 'string' ? (e as unknown as { kind: string }).kind : 'internal';
    post({ type: 'error', id, kind: kind_, message: e instanceof Error ? e.message : String(e) });
  };
  // the engine starts with the first load, with the element's thread count (another count: a new engine)
  let engine: Promise<Engine> | null = null;
  let engineThreads = 0;
  let model: string | null = null;
  /** The running request's abort (cancel). */
  let running: AbortController | null = null;
  const engineFor = async (threads: number): Promise<Engine> => {
    if (engine && engineThreads !== threads) {
      const old = await engine.catch(() => null);
      if (old && model) await old.unload(model).catch(() => {});
      model = null;
      engine = null;
    }
    engineThreads = threads;
    engine ??= createEngine({ threads }).then((made) => {
      made.onStatus((s) => post({ type: 'runtime', state: s.state, message: describeStatus(s) }));
      return made;
    }, (error: unknown) => {
      engine = null;   // the next load tries again
      throw error;
    });
    return engine;
  };
  const loaded = async (): Promise<{ engine: Engine; model: string; abort: AbortController }> => {
    if (!engine || !model) throw new InputError('load a bundle first');
    running = new AbortController();
    return { engine: await engine, model, abort: running };
  };

  async function handle(m: HostMessage): Promise<void> {
    switch (m.type) {
      case 'load': {
        const threads = widgetThreads(m.threads);
        stats.runtimeRequests++;
        const started = await engineFor(threads);
        if (model && model !== m.bundle) await started.unload(model).catch(() => {});
        model = null;
        const info = await started.load(m.bundle, {
          onProgress: (p) => post({ type: 'progress', id: m.id, phase: p.phase, file: p.file, loaded: p.loaded, total: p.total, percent: p.percent }),
        });
        model = m.bundle;
        post({ type: 'loaded', id: m.id, info: { ...info, crossOriginIsolated: self.crossOriginIsolated } });
        return;
      }
      case 'send': {
        if (kind !== 'chat') throw new InputError(`<onnxpipe-${kind}> cannot send chat messages`);
        stats.runtimeRequests++;
        const { engine: ready, model: id, abort } = await loaded();
        let text = '';
        let finish: string | null = null;
        try {
          const stream = await ready.chat.completions.create({
            model: id, messages: m.messages, stream: true, temperature: 0,
            ...(m.maxNewTokens === undefined || m.maxNewTokens === null ? {} : { max_completion_tokens: m.maxNewTokens }),
          }, { signal: abort.signal });
          for await (const chunk of stream) {
            const token = chunk.choices[0]?.delta.content;
            if (token) {
              text += token;
              post({ type: 'token', id: m.id, text: token });
            }
            finish = chunk.choices[0]?.finish_reason ?? finish;
          }
        } catch (error) {
          if (!abort.signal.aborted) throw error;
          finish = 'cancelled';   // cancel(): the reply so far
        }
        post({ type: 'replied', id: m.id, text, finishReason: finish });
        return;
      }
      case 'speak': {
        if (kind !== 'speak') throw new InputError(`<onnxpipe-${kind}> cannot speak`);
        stats.runtimeRequests++;
        const { engine: ready, model: id, abort } = await loaded();
        const made: { samples: Float32Array; sentence: SentenceInfo }[] = [];
        let rate = 0;
        try {
          const events = await ready.audio.speech.create({ model: id, input: m.text, stream_format: 'sse' }, { signal: abort.signal });
          for await (const event of events) {
            if (event.type === 'speech.audio.delta') {
              const { samples, sample_rate: sampleRate, sentence, index } = event.onnxpipe;
              rate = sampleRate;
              made.push({ samples, sentence });
              post({ type: 'audio', id: m.id, index, samples, sampleRate, text: sentence.text });
            } else {
              const { result, wav } = event.onnxpipe;
              post({ type: 'spoken', id: m.id, result: { ...result, wav } }, [wav.buffer]);
            }
          }
        } catch (error) {
          if (!abort.signal.aborted) throw error;
          // cancel(): what was made, as the runtime reports a cancelled speech
          const result = cancelledSpeech(made, rate);
          post({ type: 'spoken', id: m.id, result }, [result.wav.buffer]);
        }
        return;
      }
      case 'cancel':
        running?.abort();
        return;
    }
  }

  window.addEventListener('message', (event) => {
    const m = fromParent(event, window.parent, origin);
    if (!m) {
      stats.rejected++;   // anyone else (another frame, a wrong origin, a malformed message): no answer
      return;
    }
    stats.accepted++;
    handle(m).catch((e) => fail(m.id, e));
  });
  if (status) status.textContent = `Serving an onnxpipe ${kind} widget on ${origin}.`;
  post({ type: 'hello', kind, crossOriginIsolated: self.crossOriginIsolated });
}

start();
