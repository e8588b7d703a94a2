// 'listen', 'unlisten' and 'audio_clip' (web/src/protocol.ts): the loaded voice-activity bundle
// runs on microphone chunks that arrive on a MessagePort straight from the capture worklet
// (workers/audio-tap.ts); 'speech' events go to the page under the listen's id, a paused or
// finished utterance with its samples.

import type { ArgsOf, AudioClip, ErrorKind, SpeechEvent, VadEvent, WorkerMessage } from '../web/src/protocol';
import { AudioTap } from './audio-tap';
import type { PythonEntry } from './python-entry';

export class Listener {
  private readonly tap = new AudioTap();
  private id: number | null = null;
  private sampleRate = 16000;

  /** ``post``: a message to the page (events and a late error of the running listen). */
  constructor(private readonly post: (message: WorkerMessage, transfer?: Transferable[]) => void) {}

  /** Start the detector, then feed it from the port; resolves with the rate it takes (a failed
   * start throws, and closes the port). */
  async listen(id: number, args: ArgsOf<'listen'>, entry: PythonEntry): Promise<{ sample_rate: number }> {
    await this.stop(entry);
    let started;
    try {
      started = await entry.call('listen_start', { controls: args.controls ?? {}, ...(args.pause_ms === undefined ? {} : { pause_ms: args.pause_ms }) });
    } catch (error) {
      args.port.close();
      throw error;
    }
    this.sampleRate = started.sample_rate;
    this.id = id;
    this.tap.attach(args.port, async (samples) => {
      if (this.id !== id) return;
      const heard = await entry.call('listen_push', {}, undefined, samples);
      for (const event of heard.events) this.report(id, event);
    }, (error) => {
      // the tap stopped: tell the page once, under the listen's id
      if (this.id !== id) return;
      this.id = null;
      const e = error as Error & { kind?: string };
      this.post({ id, error: { kind: (e.kind ?? 'internal') as ErrorKind, message: e.message ?? String(error) } });
    });
    return { sample_rate: this.sampleRate };
  }

  /** Stop feeding the detector and end its stream. */
  async stop(entry: PythonEntry): Promise<void> {
    if (this.id === null) return;
    this.id = null;
    this.tap.detach();
    await this.tap.settled();
    await entry.call('listen_stop', {});
  }

  /** The position now and, with ``from``, the samples since then (their buffer in ``transfer``). */
  clip(args: ArgsOf<'audio_clip'>, transfer: Transferable[]): AudioClip {
    const position = this.tap.position;
    const samples = args.from === undefined ? null : this.tap.slice(args.from, position);
    if (samples) transfer.push(samples.buffer);
    return { position, samples };
  }

  private report(id: number, event: VadEvent): void {
    const position = this.tap.position;
    if (event.type === 'speech_start') {
      this.speech(id, { type: 'speech_start', start: event.start, end: null, position, samples: null });
      return;
    }
    const end = event.end ?? event.time;
    const samples = this.tap.slice(Math.floor(event.start * this.sampleRate), Math.ceil(end * this.sampleRate));
    this.speech(id, { type: event.type, start: event.start, end, position, samples }, [samples.buffer]);
  }

  private speech(id: number, data: SpeechEvent, transfer: Transferable[] = []): void {
    this.post({ id, event: 'speech', data }, transfer);
  }
}
