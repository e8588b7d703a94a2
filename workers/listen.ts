// 'listen', 'unlisten' and 'audio-clip' (web/src/protocol.ts): the loaded voice-activity bundle
// runs on microphone chunks that arrive on a MessagePort straight from the capture worklet
// (workers/audio-tap.ts); speech events go to the page, a finished utterance with its samples.

import type { ControlValue, ErrorKind, Event, Request } from '../web/src/protocol';
import { AudioTap } from './audio-tap';

/** The Python entry points a listen needs (py/onnxpipe/web_entry.py). */
export interface VadEntry {
  start(controlsJson: string): Promise<string>;
  push(samples: Float32Array): Promise<string>;
  stop(): Promise<string>;
}

interface PyEvent {
  type: 'speech_start' | 'speech_end';
  start: number;
  end?: number;
  time: number;
}

type Reply = { error?: { kind: string; message: string } } & Record<string, unknown>;

export class Listener {
  private readonly tap = new AudioTap();
  private id: number | null = null;
  private sampleRate = 16000;

  constructor(private readonly post: (event: Event, transfer?: Transferable[]) => void) {}

  get listening(): boolean {
    return this.id !== null;
  }

  /** Start the detector, then feed it from the port. False (an error was posted) if it failed. */
  async listen(request: Extract<Request, { type: 'listen' }>, vad: VadEntry): Promise<void> {
    const { id } = request;
    await this.stop(vad);
    const started = this.parse(id, await vad.start(JSON.stringify(request.controls ?? {} satisfies Record<string, ControlValue>)));
    if (!started) {
      request.port.close();
      return;
    }
    this.sampleRate = Number(started.sample_rate ?? 16000);
    this.id = id;
    this.tap.attach(request.port, async (samples) => {
      if (this.id !== id) return;
      const reply = JSON.parse(await vad.push(samples)) as Reply & { events?: PyEvent[] };
      if (reply.error) throw Object.assign(new Error(reply.error.message), { kind: reply.error.kind });
      for (const event of reply.events ?? []) this.report(id, event);
    }, (error) => {
      // the tap stopped: tell the page once, under the listen's id
      if (this.id !== id) return;
      this.id = null;
      const e = error as Error & { kind?: string };
      this.post({ type: 'error', id, kind: (e.kind ?? 'internal') as ErrorKind, message: e.message ?? String(error) });
    });
    this.post({ type: 'listening', id, sampleRate: this.sampleRate });
  }

  /** Stop feeding the detector and end its stream. */
  async stop(vad: VadEntry): Promise<void> {
    if (this.id === null) return;
    this.id = null;
    this.tap.detach();
    await this.tap.settled();
    await vad.stop();
  }

  /** The position now and, with ``from``, the samples since then. */
  clip(request: Extract<Request, { type: 'audio-clip' }>): void {
    const position = this.tap.position;
    const samples = request.from === undefined ? null : this.tap.slice(request.from, position);
    this.post({ type: 'clip', id: request.id, position, samples }, samples ? [samples.buffer] : []);
  }

  private report(id: number, event: PyEvent): void {
    const position = this.tap.position;
    if (event.type === 'speech_start') {
      this.post({ type: 'speech', id, kind: 'start', start: event.start, end: null, position, samples: null });
      return;
    }
    const end = event.end ?? event.time;
    const samples = this.tap.slice(Math.floor(event.start * this.sampleRate), Math.ceil(end * this.sampleRate));
    this.post({ type: 'speech', id, kind: 'end', start: event.start, end, position, samples }, [samples.buffer]);
  }

  private parse(id: number, json: string): Record<string, unknown> | null {
    const reply = JSON.parse(json) as Reply;
    if (reply.error) {
      this.post({ type: 'error', id, kind: reply.error.kind as ErrorKind, message: reply.error.message });
      return null;
    }
    return reply;
  }
}
