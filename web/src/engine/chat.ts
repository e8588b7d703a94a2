// engine.chat.completions.create: OpenAI's Chat Completions over a loaded text bundle, streamed
// (an async iterable of chunks) or whole; an AbortSignal cancels within one decode step.

import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { GenerationResult, GrammarInfo, SpeculationStats, ToolCall } from '../protocol';
import { Channel } from './channel';
import { type ChatParams, generateCall } from './chat-params';
import { AbortError, fromRuntime } from './errors';
import type { ModelSlot, ModelTable } from './models';

export interface RequestOptions {
  signal?: AbortSignal;
}

type Finish = ChatCompletion.Choice['finish_reason'];

/** onnxpipe's extra on the last chunk (the one with finish_reason) and on a whole completion:
 * the completion's token ids and how fast it was made. */
export interface OnnxpipeChatStats {
  token_ids: number[];
  prefill_ms: number;
  decode_tokens_per_s: number;
  /** speculative decoding's drafts (the request's ``speculative``), when it ran */
  speculative?: SpeculationStats;
  /** constrained output (response_format or a forced tool call): compile time, cache, completeness */
  grammar?: GrammarInfo;
}

/** A chunk with onnxpipe's extra ``onnxpipe``: on a content chunk {token_ids} (the tokens that
 * text came from), on the last chunk OnnxpipeChatStats. */
export type OnnxpipeChatCompletionChunk = ChatCompletionChunk & { onnxpipe?: { token_ids: number[] } | OnnxpipeChatStats };
export type OnnxpipeChatCompletion = ChatCompletion & { onnxpipe: OnnxpipeChatStats };

const newId = (): string => `chatcmpl-${crypto.randomUUID?.() ?? `${Date.now()}${Math.random()}`}`;

function usage(result: GenerationResult): NonNullable<ChatCompletion['usage']> {
  return {
    prompt_tokens: result.prompt_tokens, completion_tokens: result.tokens.length, total_tokens: result.prompt_tokens + result.tokens.length,
    prompt_tokens_details: { cached_tokens: result.cached_tokens },
  };
}

function stats(result: GenerationResult): OnnxpipeChatStats {
  return {
    token_ids: [...result.tokens], prefill_ms: result.prefill_ms, decode_tokens_per_s: result.decode_tokens_per_s,
    ...(result.speculative ? { speculative: result.speculative } : {}),
    ...(result.grammar ? { grammar: result.grammar } : {}),
  };
}

/** OpenAI's finish_reason: "tool_calls" when the reply is tool calls. */
function finishOf(result: GenerationResult): Finish {
  return (result.tool_calls?.length ? 'tool_calls' : result.finish_reason) as Finish;
}

/** The reply as OpenAI's assistant message: content null when the reply is only tool calls. */
function message(result: GenerationResult): ChatCompletion.Choice['message'] {
  const calls: ToolCall[] | undefined = result.tool_calls?.length ? result.tool_calls : undefined;
  if (!calls) return { role: 'assistant', content: result.text, refusal: null };
  return { role: 'assistant', content: result.text || null, refusal: null, tool_calls: calls.map((c) => ({ ...c, function: { ...c.function } })) };
}

export class ChatCompletions {
  constructor(private readonly models: ModelTable) {}

  create(params: ChatParams & { stream: true }, options?: RequestOptions): Promise<AsyncIterable<OnnxpipeChatCompletionChunk>>;
  create(params: ChatParams & { stream?: false | null }, options?: RequestOptions): Promise<OnnxpipeChatCompletion>;
  create(params: ChatParams, options?: RequestOptions): Promise<OnnxpipeChatCompletion | AsyncIterable<OnnxpipeChatCompletionChunk>>;
  async create(params: ChatParams, options: RequestOptions = {}): Promise<OnnxpipeChatCompletion | AsyncIterable<OnnxpipeChatCompletionChunk>> {
    const call = generateCall(params);
    const { signal } = options;
    if (signal?.aborted) throw new AbortError();
    const id = newId();
    const created = Math.floor(Date.now() / 1000);
    const chunk = (delta: ChatCompletionChunk.Choice['delta'], finish: Finish | null = null): OnnxpipeChatCompletionChunk => ({
      id, object: 'chat.completion.chunk', created, model: call.model,
      choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
    });
    const channel = call.stream ? new Channel<OnnxpipeChatCompletionChunk>() : null;
    // With tools the reply may turn out to be calls, which are not content: it is sent whole at the end.
    const holdBack = call.options.tools !== undefined && call.options.tool_choice !== 'none';
    const run = (slot: ModelSlot) => this.generate(slot, call.messages, call.options, signal,
      (text, ids) => { if (!holdBack) channel?.push({ ...chunk({ content: text }), onnxpipe: { token_ids: ids } }); });
    const done = this.models.queue(call.model, async (slot) => {
      if (signal?.aborted) throw new AbortError();   // aborted while queued
      channel?.push(chunk({ role: 'assistant', content: '' }));
      return run(slot);
    });
    if (!channel) {
      const result = await done;
      return {
        id, object: 'chat.completion', created, model: call.model,
        choices: [{ index: 0, message: message(result), finish_reason: finishOf(result), logprobs: null }],
        usage: usage(result),
        onnxpipe: stats(result),
      };
    }
    // The reader sees the AbortError on its next read; the worker's cancel completes behind it.
    const abortStream = () => channel.abort(new AbortError());
    signal?.addEventListener('abort', abortStream, { once: true });
    done.then((result) => {
      if (holdBack && result.text) channel.push({ ...chunk({ content: result.text }), onnxpipe: { token_ids: [...result.tokens] } });
      result.tool_calls?.forEach((c, index) => channel.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { ...c.function } }] })));
      channel.push({ ...chunk({}, finishOf(result)), onnxpipe: stats(result) });
      if (call.includeUsage) channel.push({ ...chunk({}), choices: [], usage: usage(result) });
      channel.end();
    }, (error: unknown) => channel.end(error)).finally(() => signal?.removeEventListener('abort', abortStream));
    return channel;
  }

  /** One generation on ``slot``; an abort cancels it in the worker and rejects with AbortError. */
  private async generate(slot: ModelSlot, messages: Parameters<ModelSlot['client']['generate']>[0]['messages'],
    options: Parameters<ModelSlot['client']['generate']>[0]['options'], signal: AbortSignal | undefined,
    onText: (text: string, ids: number[]) => void): Promise<GenerationResult & { finish_reason: string }> {
    const abort = () => void slot.client.cancel();
    signal?.addEventListener('abort', abort, { once: true });
    try {
      const result = await slot.client.generate({ messages, options, onToken: (text, ids) => { if (text && !signal?.aborted) onText(text, [...ids]); } });
      if (signal?.aborted || result.finish_reason === 'cancelled') throw new AbortError();
      return result as GenerationResult & { finish_reason: string };
    } catch (error) {
      throw fromRuntime(error);
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  }
}
