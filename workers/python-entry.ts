// The worker's side of Python's one entry (py/onnxpipe/web_entry.py `call`): a verb, its args as
// JSON, an ``emit(event, json, data)`` for streamed events and a block of data (audio samples,
// decoded images); the reply is {"result"} or {"error": {kind, message}}, thrown as a CallError.

import type {
  FilesNeeded, GenerationResult, ListenHeard, ListenStarted, OpenedBundle, RunResult, SpeechResult, TranscriptionResult,
  VoiceActivityResult,
} from '../web/src/protocol';
import { CallError } from './call';

/** Each verb of Python's table (web_entry.VERBS) and what it resolves with. */
export interface PythonVerbs {
  files_needed: FilesNeeded;
  open_bundle: OpenedBundle;
  generate: GenerationResult;
  speak: SpeechResult;
  run: RunResult;
  detect_speech: VoiceActivityResult;
  transcribe: TranscriptionResult;
  listen_start: ListenStarted;
  listen_push: ListenHeard;
  listen_stop: null;
  dispose: null;
}

/** Python's emit: an event name, its JSON, and a typed array or nothing. */
export type PythonEmit = (event: string, json: string, data?: ArrayBufferView | null) => void;

interface PyFunction {
  callPromising(...args: unknown[]): Promise<string>;
}


export class PythonEntry {
  private readonly entry: PyFunction;

  /** ``module``: the imported onnxpipe.web_entry (workers/boot.ts). */
  constructor(module: unknown) {
    this.entry = (module as { call: PyFunction }).call;
  }

  async call<V extends keyof PythonVerbs>(verb: V, args: object, emit?: PythonEmit, data?: unknown): Promise<PythonVerbs[V]> {
    const reply = JSON.parse(await this.entry.callPromising(verb, JSON.stringify(args), emit, data)) as
      { result: PythonVerbs[V] } | { error: { kind: string; message: string } };
    if ('error' in reply) throw new CallError(reply.error.kind, reply.error.message);
    return reply.result;
  }
}
