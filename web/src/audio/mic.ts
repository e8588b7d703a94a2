// The microphone: getUserMedia -> AudioWorklet (capture.worklet.ts: mono, 16 kHz, 512-sample
// chunks). The page only hands out MessagePorts: connect(port) sends the chunks to whoever
// holds the other end (a runtime worker), and levels come back for the meter.

import workletUrl from './capture.worklet.ts?worker&url';
import { RuntimeError } from '../client';
import { CAPTURE_CHUNK, CAPTURE_RATE, type CaptureOptions, type LevelMessage, type WorkletCommand } from './capture-protocol';

/** The microphone cannot be used, for a reason on the user's side (kind 'device': none, busy,
 * unplugged, a browser without the means; 'permission': access refused). ``problem`` and
 * ``fix`` are plain words for the page, which adds what to press next (advice()). */
export class MicError extends RuntimeError {
  constructor(override readonly kind: 'device' | 'permission', readonly problem: string, readonly fix: string) {
    super(kind, `${sentence(problem)} ${sentence(fix)}`);
    this.name = 'MicError';
  }

  /** What the page shows: the problem, then the fix and the button to press after it. */
  advice(then: string): { kind: MicError['kind']; message: string } {
    return { kind: this.kind, message: `${sentence(this.problem)} ${capitalize(this.fix)}, then ${then}.` };
  }
}

const capitalize = (text: string): string => text.charAt(0).toUpperCase() + text.slice(1);
const sentence = (text: string): string => `${capitalize(text)}.`;

export const NO_MICROPHONE = (): MicError => new MicError('device', 'no microphone was found', 'plug one in or allow this page to use it');
export const MIC_REFUSED = (): MicError =>
  new MicError('permission', 'this page is not allowed to use the microphone', 'allow it in the browser\'s site settings (the icon left of the address)');

/** Why getUserMedia failed, in words a user can act on. */
export function micError(error: unknown): MicError {
  const name = error instanceof DOMException ? error.name : '';
  if (name === 'NotAllowedError' || name === 'SecurityError') return MIC_REFUSED();
  if (name === 'NotFoundError' || name === 'OverconstrainedError') return NO_MICROPHONE();
  if (name === 'NotReadableError' || name === 'AbortError') {
    return new MicError('device', 'the microphone could not be opened (another program may be using it)', 'close that program or pick another microphone');
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new MicError('device', `the microphone could not be opened (${detail})`, 'check that it works in another program');
}

/** A browser that gives this page no microphone at all (no secure origin, no AudioWorklet). */
export function unsupportedMicrophone(): MicError | null {
  if (!navigator.mediaDevices?.getUserMedia) {
    return new MicError('device', 'this browser gives no microphone access on this page', 'open the page over https (or on localhost)');
  }
  if (typeof AudioWorkletNode === 'undefined') {
    return new MicError('device', 'this browser cannot record audio here (it has no AudioWorklet)', 'use a current Chrome, Edge, Firefox or Safari');
  }
  return null;
}

export class Microphone {
  /** RMS level of each chunk (0..1), on the page's thread. */
  onLevel: (rms: number, at: number) => void = () => {};
  /** The browser ended the capture while open (unplugged, access revoked); stop() was called. */
  onLost: (error: MicError) => void = () => {};
  private ctx: AudioContext | null = null;
  private stream: MediaStream | null = null;
  private node: AudioWorkletNode | null = null;
  private source: MediaStreamAudioSourceNode | null = null;

  get active(): boolean {
    return this.node !== null;
  }

  /** The device's rate the worklet resamples from (null before start). */
  get deviceRate(): number | null {
    return this.ctx?.sampleRate ?? null;
  }

  /** Open the microphone and start the worklet. Chunks go nowhere until connect(). */
  async start(): Promise<void> {
    if (this.node) return;
    const unsupported = unsupportedMicrophone();
    if (unsupported) throw unsupported;
    try {
      // echo cancellation keeps the assistant's own voice out of the VAD while it speaks; noise
      // suppression and gain control stay off: they reshape speech enough to change what
      // Whisper hears (measured: a Piper question came back at 0.86 correlation with them on)
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false, autoGainControl: false },
      });
    } catch (error) {
      throw micError(error);
    }
    const stream = this.stream;
    for (const track of stream.getAudioTracks()) {
      // 'ended' fires only when the browser ends the track, never after our own track.stop()
      track.addEventListener('ended', () => {
        if (this.stream !== stream) return;
        this.stop();
        this.onLost(new MicError('device', 'the microphone was disconnected', 'plug it in again or allow this page to use it'));
      });
    }
    try {
      this.ctx = new AudioContext();
      await this.ctx.audioWorklet.addModule(workletUrl);
      const processorOptions: CaptureOptions = { rate: CAPTURE_RATE, chunk: CAPTURE_CHUNK };
      this.node = new AudioWorkletNode(this.ctx, 'onnxpipe-capture', {
        numberOfInputs: 1, numberOfOutputs: 0, channelCount: 1, channelCountMode: 'explicit', processorOptions,
      });
      this.node.port.onmessage = (event: MessageEvent<LevelMessage>) => {
        if (event.data.type === 'level') this.onLevel(event.data.rms, event.data.at);
      };
      this.source = this.ctx.createMediaStreamSource(this.stream);
      this.source.connect(this.node);
      if (this.ctx.state === 'suspended') await this.ctx.resume();
    } catch (error) {
      this.stop();
      throw error;
    }
  }

  /** Send the 16 kHz chunks to ``port`` from now on (the worklet drops its previous port). */
  connect(port: MessagePort): void {
    if (!this.node) throw new Error('the microphone is not started');
    const command: WorkletCommand = { type: 'connect', port };
    this.node.port.postMessage(command, [port]);
  }

  /** Release the device and the audio graph. */
  stop(): void {
    if (this.node) {
      const command: WorkletCommand = { type: 'stop' };
      this.node.port.postMessage(command);
      this.node.port.onmessage = null;
    }
    this.source?.disconnect();
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    void this.ctx?.close().catch(() => undefined);
    this.node = null;
    this.source = null;
    this.stream = null;
    this.ctx = null;
  }
}
