// The microphone: getUserMedia -> AudioWorklet (capture.worklet.ts: mono, 16 kHz, 512-sample
// chunks). The page only hands out MessagePorts: connect(port) sends the chunks to whoever
// holds the other end (a runtime worker), and levels come back for the meter.

import workletUrl from './capture.worklet.ts?worker&url';
import { CAPTURE_CHUNK, CAPTURE_RATE, type CaptureOptions, type LevelMessage, type WorkletCommand } from './capture-protocol';

export class MicError extends Error {
  constructor(readonly kind: 'permission' | 'device' | 'unsupported', message: string) {
    super(message);
    this.name = 'MicError';
  }
}

/** Why getUserMedia failed, in words a user can act on. */
function micError(error: unknown): MicError {
  const name = error instanceof DOMException ? error.name : '';
  if (name === 'NotAllowedError' || name === 'SecurityError') {
    return new MicError('permission', 'microphone access was refused: allow it in the browser\'s site settings');
  }
  if (name === 'NotFoundError' || name === 'OverconstrainedError') return new MicError('device', 'no microphone was found');
  if (name === 'NotReadableError') return new MicError('device', 'the microphone is in use by another program');
  return new MicError('device', error instanceof Error ? error.message : String(error));
}

export class Microphone {
  /** RMS level of each chunk (0..1), on the page's thread. */
  onLevel: (rms: number, at: number) => void = () => {};
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
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new MicError('unsupported', 'this browser gives no microphone access here (a secure origin is needed)');
    }
    if (typeof AudioWorkletNode === 'undefined') throw new MicError('unsupported', 'this browser has no AudioWorklet');
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
    if (!this.node) throw new MicError('device', 'the microphone is not started');
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
