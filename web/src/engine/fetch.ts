// engine.fetch: the engine behind OpenAI's HTTP routes, with no server, so the official `openai`
// client works against it: new OpenAI({apiKey: 'local', baseURL: 'http://onnxpipe.local/v1',
// fetch: engine.fetch, dangerouslyAllowBrowser: true}). Streams are server-sent events, errors
// OpenAI's error objects ({error: {message, type, param, code}}) with the status codes an
// OpenAI-compatible server gives; an aborted request rejects as fetch does (AbortError).

import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { SpeechParams, SpeechStreamEvent, TranscriptionParams } from './audio';
import type { Engine } from './engine';
import { AbortError, InputError, OnnxpipeError, fromRuntime } from './errors';

const STATUS: Partial<Record<OnnxpipeError['kind'], number>> = { input: 400, config: 400, not_found: 404, quota: 507 };

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

function errorResponse(error: OnnxpipeError): Response {
  const status = STATUS[error.kind] ?? 500;
  const type = status === 400 ? 'invalid_request_error' : status === 404 ? 'not_found_error' : 'server_error';
  return json({ error: { message: error.message, type, param: error.param, code: error.kind } }, status);
}

/** Server-sent events, each ``event`` as ``show`` makes it JSON; chat's stream ends with [DONE]. */
function sse<T>(chunks: AsyncIterable<T>, show: (event: T) => unknown = (event) => event, doneLine = true): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        for await (const chunk of chunks) controller.enqueue(encoder.encode(`data: ${JSON.stringify(show(chunk))}\n\n`));
        if (doneLine) controller.enqueue(encoder.encode('data: [DONE]\n\n'));
        controller.close();
      } catch (error) {
        controller.error(error);
      }
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
}

async function jsonBody(request: Request): Promise<Record<string, unknown>> {
  try {
    return await request.json() as Record<string, unknown>;
  } catch {
    throw new InputError('the request body is not JSON');
  }
}

async function route(engine: Engine, request: Request): Promise<Response> {
  const path = new URL(request.url).pathname.replace(/\/+$/, '');
  const options = { signal: request.signal };
  if (request.method === 'GET' && path.endsWith('/models')) return json(await engine.models.list());
  if (request.method !== 'POST') throw new OnnxpipeError('not_found', `no route for ${request.method} ${path}`);
  if (path.endsWith('/chat/completions')) {
    const params = await jsonBody(request);
    const out = await engine.chat.completions.create(params as never, options);
    return Symbol.asyncIterator in out ? sse(out as AsyncIterable<ChatCompletionChunk>) : json(out);
  }
  if (path.endsWith('/audio/speech')) {
    const params = await jsonBody(request);
    if (params.stream_format !== 'sse') return engine.audio.speech.create(params as unknown as SpeechParams, options);
    // OpenAI's events; of onnxpipe's extra only what JSON carries well (no float samples, no WAV)
    const events = await engine.audio.speech.create(params as unknown as SpeechParams & { stream_format: 'sse' }, options);
    return sse(events, (event: SpeechStreamEvent) => event.type === 'speech.audio.delta'
      ? { type: event.type, audio: event.audio, onnxpipe: { sample_rate: event.onnxpipe.sample_rate, index: event.onnxpipe.index, sentence: event.onnxpipe.sentence } }
      : { type: event.type, usage: event.usage, onnxpipe: { result: event.onnxpipe.result } }, false);
  }
  if (path.endsWith('/audio/transcriptions')) {
    const form = await request.formData().catch(() => { throw new InputError('expected a multipart/form-data body'); });
    const params: Record<string, unknown> = {};
    for (const [key, value] of form.entries()) params[key] = value;
    // a form's fields are strings: OpenAI's client sends stream=true as "true"
    if (params.stream === 'true' || params.stream === 'false') params.stream = params.stream === 'true';
    if (params.stream === true) {
      const events = await engine.audio.transcriptions.create(params as unknown as TranscriptionParams & { stream: true }, options);
      return sse(events, (event) => event, false);
    }
    const result = await engine.audio.transcriptions.create(params as unknown as TranscriptionParams, options);
    return typeof result === 'string' ? new Response(result, { headers: { 'content-type': 'text/plain' } }) : json(result);
  }
  throw new OnnxpipeError('not_found', `no route for POST ${path}`);
}

export function engineFetch(engine: Engine): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    try {
      return await route(engine, request);
    } catch (error) {
      const failed = fromRuntime(error);
      if (failed instanceof AbortError || request.signal.aborted) throw new DOMException(failed.message, 'AbortError');
      return errorResponse(failed);
    }
  };
}
