// The engine's errors: one class per kind, so callers can `instanceof` or read `.kind`; `param`
// names the request field at fault (as OpenAI's error objects do). An aborted request rejects
// with an AbortError (name 'AbortError', kind 'aborted'), as fetch does.

import { RuntimeError } from '../client';

export type OnnxpipeErrorKind =
  | 'config' | 'bundle' | 'input' | 'engine' | 'quota' | 'network' | 'integrity' | 'text' | 'internal'
  | 'memory' // the model can't fit the WASM heap as asked: said before its weights are fetched
  | 'stopped' | 'device' | 'permission' | 'aborted' | 'not_found';

export class OnnxpipeError extends Error {
  constructor(readonly kind: OnnxpipeErrorKind, message: string, readonly param: string | null = null) {
    super(message);
    this.name = 'OnnxpipeError';
  }
}

/** A request field onnxpipe refuses (unknown, unsupported, or of the wrong type or range). */
export class InputError extends OnnxpipeError {
  constructor(message: string, param: string | null = null) {
    super('input', message, param);
    this.name = 'InputError';
  }
}

/** The request named a model that is not loaded and could not be. */
export class ModelNotFoundError extends OnnxpipeError {
  constructor(message: string, param: string | null = 'model') {
    super('not_found', message, param);
    this.name = 'ModelNotFoundError';
  }
}

export class AbortError extends OnnxpipeError {
  constructor(message = 'the request was aborted') {
    super('aborted', message);
    this.name = 'AbortError';
  }
}

/** The runtime's own errors (config, bundle, network, engine, stopped, ...) keep their kind. */
export function fromRuntime(error: unknown): OnnxpipeError {
  if (error instanceof OnnxpipeError) return error;
  if (error instanceof RuntimeError) {
    return error.kind === 'input' ? new InputError(error.message) : new OnnxpipeError(error.kind as OnnxpipeErrorKind, error.message);
  }
  return new OnnxpipeError('internal', error instanceof Error ? error.message : String(error));
}
