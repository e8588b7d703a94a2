// OpenAI Chat Completions request -> the runtime's generate request. Every field is either
// translated (and so works) or refused naming it: nothing is parsed and ignored.

import type { ChatCompletionCreateParams } from 'openai/resources/chat/completions';
import type { ChatMessage, ResponseFormat, SearchOptions, SpeculativeOptions } from '../protocol';
import { checkToolTurns, isObject, responseFormat, toolCalls, toolChoice, tools } from './chat-structured';
import { InputError } from './errors';

/** onnxpipe's extras beside OpenAI's fields (sampling the runtime has and OpenAI does not). */
export interface OnnxpipeChatExtras {
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
  speculative?: SpeculativeOptions | null;
}

/** OpenAI's request (each of its stream / no-stream shapes) with response_format widened to
 * onnxpipe's extras ({type: "regex"}, {type: "grammar"}). */
export type ChatParams = ChatCompletionCreateParams extends infer P
  ? P extends unknown ? Omit<P, 'response_format'> & { response_format?: ResponseFormat | null } & OnnxpipeChatExtras : never
  : never;

export interface GenerateCall {
  model: string;
  messages: ChatMessage[];
  options: SearchOptions;
  stream: boolean;
  includeUsage: boolean;
}

const FIELDS = new Set([
  'model', 'messages', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p',
  'seed', 'stop', 'n', 'top_k', 'min_p', 'repetition_penalty', 'speculative', 'response_format', 'tools', 'tool_choice',
]);
const ROLES: Record<string, ChatMessage['role']> = { system: 'system', developer: 'system', user: 'user', assistant: 'assistant', tool: 'tool' };
/** The keys each role takes besides role and content (an assistant turn's refusal: null, as a
 * returned message carries it, so a reply can go back into messages as it is). */
const EXTRA_KEYS: Record<ChatMessage['role'], string[]> = { system: [], user: [], assistant: ['tool_calls', 'refusal'], tool: ['tool_call_id'] };

function number(params: Record<string, unknown>, field: string, min: number, max: number, integer = false): number | undefined {
  const value = params[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value)) || value < min || value > max) {
    throw new InputError(`${field}: expected ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, found ${JSON.stringify(value)}`, field);
  }
  return value;
}

function messages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InputError(`messages: expected a non-empty array of {role, content}, found ${JSON.stringify(value)?.slice(0, 80)}`, 'messages');
  }
  const list = value.map((m, i): ChatMessage => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw new InputError(`${at}: expected an object {role, content}`, at);
    const role = typeof m.role === 'string' ? ROLES[m.role] : undefined;
    if (!role) throw new InputError(`${at}.role: expected one of ${Object.keys(ROLES).join(', ')}, found ${JSON.stringify(m.role)}`, `${at}.role`);
    const allowed = ['role', 'content', ...EXTRA_KEYS[role]];
    for (const key of Object.keys(m)) {
      if (!allowed.includes(key)) {
        throw new InputError(`${at}.${key}: not supported by onnxpipe on a ${m.role} message (it takes ${allowed.join(', ')})`, `${at}.${key}`);
      }
    }
    if (role === 'assistant' && m.refusal !== undefined && m.refusal !== null) {
      throw new InputError(`${at}.refusal: expected null (onnxpipe's replies never refuse), found ${JSON.stringify(m.refusal)?.slice(0, 80)}`, `${at}.refusal`);
    }
    if (role === 'assistant' && m.tool_calls !== undefined && m.tool_calls !== null) {
      // OpenAI's shape: the content of a turn that only calls tools may be null or absent
      const calls = toolCalls(m.tool_calls, `${at}.tool_calls`);
      return { role, content: m.content === null || m.content === undefined ? '' : content(m.content, `${at}.content`), tool_calls: calls };
    }
    if (role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || !m.tool_call_id) {
        throw new InputError(`${at}.tool_call_id: expected the id of the call this answers, found ${JSON.stringify(m.tool_call_id)}`, `${at}.tool_call_id`);
      }
      return { role, content: content(m.content, `${at}.content`), tool_call_id: m.tool_call_id };
    }
    return { role, content: content(m.content, `${at}.content`) };
  });
  checkToolTurns(list);
  return list;
}

/** A string, or text parts joined (the only part type a text model takes). */
function content(value: unknown, at: string): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw new InputError(`${at}: expected a string or an array of text parts, found ${JSON.stringify(value)?.slice(0, 80)}`, at);
  return value.map((part, j) => {
    if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string') {
      throw new InputError(`${at}[${j}]: expected {type: "text", text}, found ${JSON.stringify(part)?.slice(0, 80)}`, `${at}[${j}]`);
    }
    return part.text;
  }).join('');
}

function stop(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length > 4 || !list.every((s) => typeof s === 'string' && s.length > 0)) {
    throw new InputError(`stop: expected a string or up to 4 non-empty strings, found ${JSON.stringify(value)?.slice(0, 80)}`, 'stop');
  }
  return list as string[];
}

/** Check ``params`` and translate them; the first field at fault is named in the error. */
export function generateCall(params: unknown): GenerateCall {
  if (!isObject(params)) throw new InputError('expected a request object {model, messages, ...}');
  for (const field of Object.keys(params)) {
    if (!FIELDS.has(field)) throw new InputError(`${field}: not supported by onnxpipe's chat completions (supported: ${[...FIELDS].join(', ')})`, field);
  }
  if (typeof params.model !== 'string' || !params.model) throw new InputError('model: expected the URL of a loaded or loadable bundle', 'model');
  if (params.stream !== undefined && params.stream !== null && typeof params.stream !== 'boolean') {
    throw new InputError(`stream: expected true or false, found ${JSON.stringify(params.stream)}`, 'stream');
  }
  let includeUsage = false;
  if (params.stream_options !== undefined && params.stream_options !== null) {
    const so = params.stream_options;
    if (!isObject(so) || Object.keys(so).some((k) => k !== 'include_usage') || (so.include_usage !== undefined && typeof so.include_usage !== 'boolean')) {
      throw new InputError(`stream_options: expected {include_usage: boolean}, found ${JSON.stringify(so)?.slice(0, 80)}`, 'stream_options');
    }
    if (!params.stream) throw new InputError('stream_options: only with stream: true', 'stream_options');
    includeUsage = so.include_usage === true;
  }
  number(params, 'n', 1, 1, true);   // one choice per request
  const options: SearchOptions = {};
  const maxTokens = number(params, 'max_completion_tokens', 1, 1 << 20, true) ?? number(params, 'max_tokens', 1, 1 << 20, true);
  if (maxTokens !== undefined) options.max_new_tokens = maxTokens;
  const temperature = number(params, 'temperature', 0, 2);
  const topP = number(params, 'top_p', 0, 1);
  if (topP === 0) throw new InputError('top_p: expected a number above 0, up to 1', 'top_p');
  if (temperature === 0) {
    options.do_sample = false;
  } else if (temperature !== undefined || topP !== undefined) {
    options.do_sample = true;
    if (temperature !== undefined) options.temperature = temperature;
  }
  if (topP !== undefined) options.top_p = topP;
  const seed = number(params, 'seed', 0, Number.MAX_SAFE_INTEGER, true);
  if (seed !== undefined) options.random_seed = seed;
  const stops = stop(params.stop);
  if (stops) options.stop_strings = stops;
  const topK = number(params, 'top_k', 0, 1 << 20, true);
  if (topK !== undefined) options.top_k = topK;
  const minP = number(params, 'min_p', 0, 1);
  if (minP !== undefined) options.min_p = minP;
  const penalty = number(params, 'repetition_penalty', Number.MIN_VALUE, 100);
  if (penalty !== undefined) options.repetition_penalty = penalty;
  if (params.speculative !== undefined) options.speculative = params.speculative as SpeculativeOptions | null;   // checked by the runtime
  const format = responseFormat(params.response_format);
  if (format) options.response_format = format;
  const declared = tools(params.tools);
  if (declared) options.tools = declared;
  const choice = toolChoice(params.tool_choice, declared);
  if (choice) options.tool_choice = choice;
  return { model: params.model, messages: messages(params.messages), options, stream: params.stream === true, includeUsage };
}
