// engine.audio.speech.create and engine.audio.transcriptions.create: OpenAI's Audio shapes over
// a loaded speech bundle (WAV out) and a transcription bundle (any audio file the browser decodes).

import type { SpeechCreateParams } from 'openai/resources/audio/speech';
import type { Transcription } from 'openai/resources/audio/transcriptions';
import { decodeAudioFile } from '../audio/decode';
import type { ControlValue } from '../protocol';
import type { RequestOptions } from './chat';
import { AbortError, InputError, fromRuntime } from './errors';
import type { ModelSlot, ModelTable } from './models';

/** onnxpipe's extra: the bundle's other voice controls by name (e.g. Piper's noise_scale). */
export type SpeechParams = Omit<SpeechCreateParams, 'voice'> & { voice?: SpeechCreateParams['voice']; controls?: Record<string, ControlValue> };

export interface TranscriptionParams {
  model: string;
  file: Blob;
  response_format?: 'json' | 'text';
}

const SPEECH_FIELDS = new Set(['model', 'input', 'voice', 'response_format', 'speed', 'controls']);
const TRANSCRIPTION_FIELDS = new Set(['model', 'file', 'response_format']);

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

  /** A Response holding the WAV (``await response.arrayBuffer()``), as OpenAI's client returns. */
  async create(params: SpeechParams, options: RequestOptions = {}): Promise<Response> {
    onlyFields(params, SPEECH_FIELDS, 'speech');
    if (typeof params.input !== 'string' || !params.input.trim()) throw new InputError('input: expected the text to speak', 'input');
    if (params.response_format !== undefined && params.response_format !== 'wav') {
      throw new InputError(`response_format: onnxpipe makes "wav", found ${JSON.stringify(params.response_format)}`, 'response_format');
    }
    return this.models.queue(params.model, async (slot) => {
      if (slot.info.kind !== 'speech') throw new InputError(`model: "${params.model}" is a ${slot.info.kind} bundle, not a voice`, 'model');
      const controls = speechControls(slot, params);
      const { wav } = await run(slot, options.signal, () => slot.client.speak({ text: params.input, controls }));
      return new Response(new Blob([wav as Uint8Array<ArrayBuffer>], { type: 'audio/wav' }), { headers: { 'content-type': 'audio/wav' } });
    });
  }
}

export class Transcriptions {
  constructor(private readonly models: ModelTable) {}

  create(params: TranscriptionParams & { response_format: 'text' }, options?: RequestOptions): Promise<string>;
  create(params: TranscriptionParams, options?: RequestOptions): Promise<Transcription>;
  async create(params: TranscriptionParams, options: RequestOptions = {}): Promise<Transcription | string> {
    onlyFields(params, TRANSCRIPTION_FIELDS, 'transcriptions');
    if (!(params.file instanceof Blob)) throw new InputError('file: expected a File or Blob of audio', 'file');
    const format = params.response_format ?? 'json';
    if (format !== 'json' && format !== 'text') throw new InputError(`response_format: expected "json" or "text", found ${JSON.stringify(format)}`, 'response_format');
    let audio;
    try {
      audio = await decodeAudioFile(await params.file.arrayBuffer());
    } catch (error) {
      throw new InputError(`file: ${error instanceof Error ? error.message : String(error)}`, 'file');
    }
    return this.models.queue(params.model, async (slot) => {
      if (slot.info.kind !== 'transcription') throw new InputError(`model: "${params.model}" is a ${slot.info.kind} bundle, not a recogniser`, 'model');
      const result = await run(slot, options.signal, () => slot.client.transcribe(audio.samples, audio.sampleRate));
      const text = result.text.trim();
      return format === 'text' ? text : { text };
    });
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
