// embed.html: the frame behind one <onnxpipe-chat>/<onnxpipe-speak> element. It runs the
// runtime worker through RuntimeClient (web/src/client.ts) on onnxpipe's own origin, so the
// host page can reach neither the worker nor this origin's stored models; it takes requests
// only from its parent window on the parent's origin and answers only there.

import { RuntimeClient, RuntimeError } from '../client';
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
  const client = new RuntimeClient();
  const post = (message: Untagged<FrameMessage>, transfer: Transferable[] = []): void =>
    window.parent.postMessage({ ...message, onnxpipe: TAG }, { targetOrigin: origin, transfer });
  client.onStatus((s) => post({ type: 'runtime', state: s.state, message: describeStatus(s) }));
  const fail = (id: number | null, e: unknown): void => {
    const kind_ = e instanceof RuntimeError ? e.kind : 'internal';
    post({ type: 'error', id, kind: kind_, message: e instanceof Error ? e.message : String(e) });
  };
  async function handle(m: HostMessage): Promise<void> {
    switch (m.type) {
      case 'load': {
        const threads = widgetThreads(m.threads);
        stats.runtimeRequests++;
        const info = await client.load(m.bundle, {
          threads,
          onProgress: (p) => post({ type: 'progress', id: m.id, phase: p.phase, file: p.file, loaded: p.loaded, total: p.total, percent: p.percent }),
        });
        post({ type: 'loaded', id: m.id, info: { ...info, crossOriginIsolated: self.crossOriginIsolated } });
        return;
      }
      case 'send': {
        if (kind !== 'chat') throw new RuntimeError('input', `<onnxpipe-${kind}> cannot send chat messages`);
        stats.runtimeRequests++;
        const result = await client.generate({
          messages: m.messages,
          options: { do_sample: false, max_new_tokens: m.maxNewTokens },
          onToken: (text) => post({ type: 'token', id: m.id, text }),
        });
        post({ type: 'replied', id: m.id, text: result.text, finishReason: result.finish_reason });
        return;
      }
      case 'speak': {
        if (kind !== 'speak') throw new RuntimeError('input', `<onnxpipe-${kind}> cannot speak`);
        stats.runtimeRequests++;
        const { result, wav } = await client.speak({
          text: m.text,
          onAudio: (samples, sampleRate, sentence, index) =>
            post({ type: 'audio', id: m.id, index, samples, sampleRate, text: sentence.text }, [samples.buffer]),
        });
        post({ type: 'spoken', id: m.id, result: { ...result, wav } }, [wav.buffer]);
        return;
      }
      case 'cancel':
        await client.cancel();
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
