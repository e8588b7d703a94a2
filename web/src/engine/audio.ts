// engine.audio.speech.create and engine.audio.transcriptions.create: OpenAI's Audio shapes over
// a loaded speech bundle (WAV out) and a transcription bundle (any audio file the browser decodes).

import type { SpeechCreateParams } from 'openai/resources/audio/speech';
import type { Transcription } from 'openai/resources/audio/transcriptions';
import { decodeAudioFile } from '../audio/decode';
import type { ControlValue, SentenceInfo, SpeechResult, TranscriptWindow } from '../protocol';
import { Channel } from './channel';
import type { RequestOptions } from './chat';
import { AbortError, InputError, fromRuntime } from './errors';
import type { ModelSlot, ModelTable } from './models';

/** onnxpipe's extra: the bundle's other voice controls by name (e.g. Piper's noise_scale). */
export type SpeechParams = Omit<SpeechCreateParams, 'voice'> & { voice?: SpeechCreateParams['voice']; controls?: Record<string, ControlValue> };

/** A streamed speech's sentence (``stream_format: "sse"``): OpenAI's event, ``audio`` the
 * sentence as base64 16-bit little-endian PCM, mono, at ``onnxpipe.sample_rate`` (made when
 * read); onnxpipe's extra: the same samples as floats, the rate, the sentence's index and
 * {text, samples, audio_seconds, compute_seconds, ids, tokens?}. */
export interface SpeechAudioDelta {
  type: 'speech.audio.delta';
  audio: string;
  onnxpipe: { samples: Float32Array; sample_rate: number; index: number; sentence: SentenceInfo };
}

/** The end of a streamed speech; onnxpipe's extra: the timings of the whole and the WAV of it. */
export interface SpeechAudioDone {
  type: 'speech.audio.done';
  usage: { input_tokens: number; output_tokens: number; total_tokens: number };
  onnxpipe: { result: SpeechResult; wav: Uint8Array };
}

export type SpeechStreamEvent = SpeechAudioDelta | SpeechAudioDone;

/** ``samples`` as base64 16-bit little-endian PCM. */
function pcm16Base64(samples: Float32Array): string {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) view.setInt16(i * 2, Math.round(Math.max(-1, Math.min(1, samples[i])) * 32767), true);
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

function delta(samples: Float32Array, sampleRate: number, sentence: SentenceInfo, index: number): SpeechAudioDelta {
  const event = { type: 'speech.audio.delta', onnxpipe: { samples, sample_rate: sampleRate, index, sentence } } as SpeechAudioDelta;
  let audio: string | null = null;
  Object.defineProperty(event, 'audio', { enumerable: true, get: () => (audio ??= pcm16Base64(samples)) });
  return event;
}

export interface TranscriptionParams {
  model: string;
  file: Blob;
  response_format?: 'json' | 'text';
  /** OpenAI's streamed transcription: TranscriptionStreamEvent as the audio is heard */
  stream?: boolean | null;
}

/** A window of audio heard (30 s for Whisper): OpenAI's event, ``delta`` the text to add;
 * onnxpipe's extra: the window {index, start_seconds, end_seconds, text, tokens, compute_seconds}. */
export interface TranscriptTextDelta {
  type: 'transcript.text.delta';
  delta: string;
  onnxpipe: { window: TranscriptWindow };
}

/** The whole text; onnxpipe's extra: the audio's length, the time it took, the token ids and windows. */
export interface TranscriptTextDone {
  type: 'transcript.text.done';
  text: string;
  onnxpipe: { audio_seconds: number; compute_seconds: number; tokens: number[]; windows: TranscriptWindow[] };
}

export type TranscriptionStreamEvent = TranscriptTextDelta | TranscriptTextDone;

const SPEECH_FIELDS = new Set(['model', 'input', 'voice', 'response_format', 'speed', 'controls', 'stream_format']);
const TRANSCRIPTION_FIELDS = new Set(['model', 'file', 'response_format', 'stream']);

function onlyFields(params: object, fields: Set<string>, what: string): void {
  for (const field of Object.keys(params)) {
    if (!fields.has(field)) throw new InputError(`${field}: not supported by onnxpipe's ${what} (supported: ${[...fields].join(', ')})`, field);
  }
}

/** The voice controls a speech request sets: ``voice`` and ``speed`` are the bundle's controls
 * of those names (a bundle with one voice takes "default" or none). */
function speechControls(slot: ModelSlot, params: SpeechParams): Record<string, ControlValue> {
  const declared = new Map(slot.info.controls.map((c) => [c.name, c]));
  const controls: Record<string, ControlValue> = { ...(params.controls ?? {}) };
  if (params.voice !== undefined) {
    const choice = declared.get('voice');
    const names = choice?.options ?? [];
    if (typeof params.voice !== 'string' || (choice ? !names.includes(params.voice) : params.voice !== 'default')) {
      throw new InputError(`voice: expected ${choice ? `one of ${names.join(', ')}` : '"default" (this bundle has one voice)'}, found ${JSON.stringify(params.voice)}`, 'voice');
    }
    if (choice) controls.voice = params.voice;
  }
  if (params.speed !== undefined) {
    if (!declared.has('speed')) throw new InputError('speed: this voice has no speed control (its controls: ' + ([...declared.keys()].join(', ') || 'none') + ')', 'speed');
    controls.speed = params.speed;
  }
  return controls;
}

export class Speech {
  constructor(private readonly models: ModelTable) {}

  /** A Response holding the WAV (``await response.arrayBuffer()``), as OpenAI's client returns;
   * with ``stream_format: "sse"`` the sentences as they are made (SpeechStreamEvent). */
  create(params: SpeechParams & { stream_format: 'sse' }, options?: RequestOptions): Promise<AsyncIterable<SpeechStreamEvent>>;
  create(params: SpeechParams, options?: RequestOptions): Promise<Response>;
  async create(params: SpeechParams, options: RequestOptions = {}): Promise<Response | AsyncIterable<SpeechStreamEvent>> {
    onlyFields(params, SPEECH_FIELDS, 'speech');
    if (typeof params.input !== 'string' || !params.input.trim()) throw new InputError('input: expected the text to speak', 'input');
    const format = params.stream_format ?? 'audio';
    if (format !== 'audio' && format !== 'sse') throw new InputError(`stream_format: expected "audio" or "sse", found ${JSON.stringify(format)}`, 'stream_format');
    const stream = format === 'sse';
    if (!stream && params.response_format !== undefined && params.response_format !== 'wav') {
      throw new InputError(`response_format: onnxpipe makes "wav", found ${JSON.stringify(params.response_format)}`, 'response_format');
    }
    if (stream && params.response_format !== undefined && params.response_format !== 'pcm') {
      throw new InputError(`response_format: with stream_format "sse" onnxpipe sends "pcm" (16-bit, at the voice's rate), found ${JSON.stringify(params.response_format)}`, 'response_format');
    }
    const { signal } = options;
    const channel = stream ? new Channel<SpeechStreamEvent>() : null;
    const done = this.models.queue(params.model, async (slot) => {
      if (slot.info.kind !== 'speech') throw new InputError(`model: "${params.model}" is a ${slot.info.kind} bundle, not a voice`, 'model');
      const controls = speechControls(slot, params);
      return run(slot, signal, () => slot.client.speak({
        text: params.input, controls,
        onAudio: channel ? (samples, rate, sentence, index) => { if (!signal?.aborted) channel.push(delta(samples, rate, sentence, index)); } : undefined,
      }));
    });
    if (!channel) {
      const { wav } = await done;
      return new Response(new Blob([wav as Uint8Array<ArrayBuffer>], { type: 'audio/wav' }), { headers: { 'content-type': 'audio/wav' } });
    }
    const abortStream = () => channel.abort(new AbortError());
    signal?.addEventListener('abort', abortStream, { once: true });
    done.then(({ result, wav }) => {
      const input = result.sentences.reduce((n, s) => n + s.ids.length, 0);
      const output = result.sentences.reduce((n, s) => n + (s.tokens?.length ?? 0), 0);
      channel.push({ type: 'speech.audio.done', usage: { input_tokens: input, output_tokens: output, total_tokens: input + output }, onnxpipe: { result, wav } });
      channel.end();
    }, (error: unknown) => channel.end(error)).finally(() => signal?.removeEventListener('abort', abortStream));
    return channel;
  }
}

export class Transcriptions {
  constructor(private readonly models: ModelTable) {}

  create(params: TranscriptionParams & { stream: true }, options?: RequestOptions): Promise<AsyncIterable<TranscriptionStreamEvent>>;
  create(params: TranscriptionParams & { response_format: 'text' }, options?: RequestOptions): Promise<string>;
  create(params: TranscriptionParams, options?: RequestOptions): Promise<Transcription>;
  async create(params: TranscriptionParams, options: RequestOptions = {}): Promise<Transcription | string | AsyncIterable<TranscriptionStreamEvent>> {
    onlyFields(params, TRANSCRIPTION_FIELDS, 'transcriptions');
    if (!(params.file instanceof Blob)) throw new InputError('file: expected a File or Blob of audio', 'file');
    const format = params.response_format ?? 'json';
    if (format !== 'json' && format !== 'text') throw new InputError(`response_format: expected "json" or "text", found ${JSON.stringify(format)}`, 'response_format');
    if (params.stream !== undefined && params.stream !== null && typeof params.stream !== 'boolean') {
      throw new InputError(`stream: expected true or false, found ${JSON.stringify(params.stream)}`, 'stream');
    }
    let audio;
    try {
      audio = await decodeAudioFile(await params.file.arrayBuffer());
    } catch (error) {
      throw new InputError(`file: ${error instanceof Error ? error.message : String(error)}`, 'file');
    }
    const { signal } = options;
    const channel = params.stream ? new Channel<TranscriptionStreamEvent>() : null;
    let shown = '';
    const heard = (window: TranscriptWindow) => {
      if (!channel || signal?.aborted) return;
      const joined = `${shown} ${window.text}`.trim();
      const delta = joined.startsWith(shown) ? joined.slice(shown.length) : ` ${window.text.trim()}`;
      shown += delta;
      channel.push({ type: 'transcript.text.delta', delta, onnxpipe: { window } });
    };
    const done = this.models.queue(params.model, async (slot) => {
      if (slot.info.kind !== 'transcription') throw new InputError(`model: "${params.model}" is a ${slot.info.kind} bundle, not a recogniser`, 'model');
      return run(slot, signal, () => slot.client.transcribe(audio.samples, audio.sampleRate, heard));
    });
    if (!channel) {
      const text = (await done).text.trim();
      return format === 'text' ? text : { text };
    }
    const abortStream = () => channel.abort(new AbortError());
    signal?.addEventListener('abort', abortStream, { once: true });
    done.then((result) => {
      channel.push({ type: 'transcript.text.done', text: result.text.trim(), onnxpipe: {
        audio_seconds: result.audio_seconds, compute_seconds: result.compute_seconds, tokens: result.tokens, windows: result.windows,
      } });
      channel.end();
    }, (error: unknown) => channel.end(error)).finally(() => signal?.removeEventListener('abort', abortStream));
    return channel;
  }
}

/** ``job`` on ``slot`` with ``signal`` cancelling it (then AbortError); runtime errors keep their kind. */
async function run<T extends { result: { finish_reason: string } } | { finish_reason: string }>(
  slot: ModelSlot, signal: AbortSignal | undefined, job: () => Promise<T>): Promise<T> {
  if (signal?.aborted) throw new AbortError();
  const abort = () => void slot.client.cancel();
  signal?.addEventListener('abort', abort, { once: true });
  try {
    const out = await job();
    const finish = 'result' in out ? out.result.finish_reason : out.finish_reason;
    if (signal?.aborted || finish === 'cancelled') throw new AbortError();
    return out;
  } catch (error) {
    throw fromRuntime(error);
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}
