// engine.audio.listen: onnxpipe's extra for a voice app. A voice-activity bundle listens to
// microphone audio that arrives on a MessagePort (the capture worklet posts into the other end:
// the audio never passes through the page) and reports speech as OpenAI's Realtime API reports
// server VAD: input_audio_buffer.speech_started / input_audio_buffer.speech_stopped events.

import type { RuntimeError } from '../client';
import type { ControlValue, SpeechEvent } from '../protocol';
import { Channel } from './channel';
import { InputError, fromRuntime } from './errors';
import type { ModelTable } from './models';

export interface ListenParams {
  /** a voice-activity bundle (LoadedInfo.kind "voice-activity") */
  model: string;
  /** the end of a MessageChannel whose other end gets {type: "chunk", samples, at} messages of
   * mono audio at the capture rate (web/src/audio/capture-protocol.ts); it is transferred */
  port: MessagePort;
  /** the bundle's controls by name (threshold, min_silence_ms, speech_pad_ms, min_speech_ms, ...) */
  controls?: Record<string, ControlValue>;
  /** also report a silence in speech that has lasted this long (ms; from speech_pad_ms up to
   * below min_silence_ms) as onnxpipe.speech_paused, with the samples its stop will carry if the
   * speech does not resume: an app can start on the utterance before its end is decided */
  pause_ms?: number;
}

/** Speech began: ``audio_start_ms`` in the listened stream; onnxpipe's extra: the same in
 * seconds and the stream's length (samples) when it was reported. */
export interface SpeechStarted {
  type: 'input_audio_buffer.speech_started';
  audio_start_ms: number;
  onnxpipe: { start: number; position: number };
}

/** Speech ended; onnxpipe's extra: the bounds in seconds, the stream's length (samples) when it
 * was reported, and the utterance's samples (padded as the bundle's segments are). */
export interface SpeechStopped {
  type: 'input_audio_buffer.speech_stopped';
  audio_start_ms: number;
  audio_end_ms: number;
  onnxpipe: { start: number; end: number; position: number; samples: Float32Array | null };
}

/** onnxpipe's own (OpenAI's Realtime API has no such event): the speech has been silent for
 * ``pause_ms``; if it does not resume, its speech_stopped comes with these bounds and samples. */
export interface SpeechPaused {
  type: 'onnxpipe.speech_paused';
  audio_start_ms: number;
  audio_end_ms: number;
  onnxpipe: { start: number; end: number; position: number; samples: Float32Array | null };
}

export type ListenEvent = SpeechStarted | SpeechPaused | SpeechStopped;

/** A running listen: its events (for await), the audio it holds, and close(). */
export interface Listening extends AsyncIterable<ListenEvent> {
  /** the rate of the audio the port carries */
  sample_rate: number;
  /** The stream's length now (samples), and the samples from ``from`` (a position) to now. */
  clip(from?: number): Promise<{ position: number; samples: Float32Array | null }>;
  /** Stop listening (the open speech, if any, is not reported); the events end. */
  close(): Promise<void>;
}

const FIELDS = new Set(['model', 'port', 'controls', 'pause_ms']);

function event(e: SpeechEvent): ListenEvent {
  if (e.type === 'speech_start' || e.end === null) {
    return { type: 'input_audio_buffer.speech_started', audio_start_ms: Math.round(e.start * 1000), onnxpipe: { start: e.start, position: e.position } };
  }
  return {
    type: e.type === 'speech_pause' ? 'onnxpipe.speech_paused' : 'input_audio_buffer.speech_stopped',
    audio_start_ms: Math.round(e.start * 1000), audio_end_ms: Math.round(e.end * 1000),
    onnxpipe: { start: e.start, end: e.end, position: e.position, samples: e.samples },
  };
}

export class Listener {
  constructor(private readonly models: ModelTable) {}

  /** Listen with ``params.model`` (loaded on demand) until close(); one listen per model. */
  async listen(params: ListenParams): Promise<Listening> {
    if (typeof params !== 'object' || params === null) throw new InputError('expected {model, port, controls?}');
    for (const field of Object.keys(params)) {
      if (!FIELDS.has(field)) throw new InputError(`${field}: not supported by onnxpipe's listen (supported: ${[...FIELDS].join(', ')})`, field);
    }
    if (typeof params.model !== 'string' || !params.model) throw new InputError('model: expected the URL of a voice-activity bundle', 'model');
    if (!(params.port instanceof MessagePort)) throw new InputError('port: expected a MessagePort the audio arrives on', 'port');
    if (params.controls !== undefined && (typeof params.controls !== 'object' || params.controls === null)) {
      throw new InputError('controls: expected an object of the bundle\'s controls by name', 'controls');
    }
    if (params.pause_ms !== undefined && (typeof params.pause_ms !== 'number' || !Number.isFinite(params.pause_ms))) {
      throw new InputError(`pause_ms: expected a number of milliseconds, found ${JSON.stringify(params.pause_ms)}`, 'pause_ms');
    }
    const slot = await this.models.get(params.model);
    if (slot.info.kind !== 'voice-activity') throw new InputError(`model: "${params.model}" is a ${slot.info.kind} bundle, not a voice-activity one`, 'model');
    const channel = new Channel<ListenEvent>();
    let sampleRate: number;
    try {
      sampleRate = await slot.client.listen(params.port, (e) => channel.push(event(e)),
        (error: RuntimeError) => channel.end(fromRuntime(error)), params.controls, params.pause_ms);
    } catch (error) {
      throw fromRuntime(error);
    }
    const { client } = slot;
    return {
      sample_rate: sampleRate,
      [Symbol.asyncIterator]: () => channel[Symbol.asyncIterator](),
      clip: async (from?: number) => {
        try {
          return await client.audioClip(from);
        } catch (error) {
          throw fromRuntime(error);
        }
      },
      close: async () => {
        channel.end();
        try {
          await client.stopListening();
        } catch (error) {
          throw fromRuntime(error);
        }
      },
    };
  }
}
