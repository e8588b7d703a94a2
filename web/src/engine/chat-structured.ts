// Chat Completions' structured output and tool fields (response_format, tools, tool_choice, and
// the tool turns of messages), checked the way py/onnxpipe/grammar/formats.py checks them, so a
// bad request is refused here naming the field before it reaches the worker.

import type { ChatMessage, ChatTool, ResponseFormat, ToolCall, ToolChoice } from '../protocol';
import { InputError } from './errors';

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** OpenAI's rule for json_schema.name and function names. */
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const FORMATS = ['text', 'json_object', 'json_schema', 'regex', 'grammar'];

const shown = (value: unknown): string => JSON.stringify(value)?.slice(0, 80) ?? String(value);

function keys(value: Record<string, unknown>, allowed: string[], at: string): void {
  const extra = Object.keys(value).find((k) => !allowed.includes(k));
  if (extra !== undefined) throw new InputError(`${at}.${extra}: unknown key; expected ${allowed.join(', ')}`, `${at}.${extra}`);
}

function text(value: unknown, at: string): string {
  if (typeof value !== 'string' || !value) throw new InputError(`${at}: expected a non-empty string, found ${shown(value)}`, at);
  return value;
}

function name(value: unknown, at: string): string {
  if (typeof value !== 'string' || !NAME.test(value)) throw new InputError(`${at}: expected 1-64 letters, digits, _ or -, found ${shown(value)}`, at);
  return value;
}

function optional(value: Record<string, unknown>, key: string, type: 'string' | 'boolean', at: string): void {
  const v = value[key];
  if (v === undefined || (v === null && type === 'boolean')) return;
  if (typeof v !== type) throw new InputError(`${at}.${key}: expected ${type === 'string' ? 'a string' : 'true or false'}, found ${shown(v)}`, `${at}.${key}`);
}

function schema(value: Record<string, unknown>, key: string, at: string): void {
  if (value[key] !== undefined && !isObject(value[key])) {
    throw new InputError(`${at}.${key}: expected a JSON Schema object, found ${shown(value[key])}`, `${at}.${key}`);
  }
}

/** response_format; undefined when absent. {type: "text"} is passed on (the runtime reads it as free text). */
export function responseFormat(value: unknown, at = 'response_format'): ResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw new InputError(`${at}: expected an object such as {"type": "json_object"}, found ${shown(value)}`, at);
  switch (value.type) {
    case 'text':
    case 'json_object':
      keys(value, ['type'], at);
      return { type: value.type };
    case 'json_schema': {
      keys(value, ['type', 'json_schema'], at);
      const spec = value.json_schema;
      const field = `${at}.json_schema`;
      if (!isObject(spec)) throw new InputError(`${field}: expected an object {name, schema, strict?, description?}, found ${shown(spec)}`, field);
      keys(spec, ['name', 'schema', 'strict', 'description'], field);
      name(spec.name, `${field}.name`);
      optional(spec, 'description', 'string', field);
      optional(spec, 'strict', 'boolean', field);
      schema(spec, 'schema', field);
      return { type: 'json_schema', json_schema: spec as Extract<ResponseFormat, { type: 'json_schema' }>['json_schema'] };
    }
    case 'regex':
      keys(value, ['type', 'regex'], at);
      return { type: 'regex', regex: text(value.regex, `${at}.regex`) };
    case 'grammar': {
      keys(value, ['type', 'grammar', 'syntax'], at);
      const grammar = text(value.grammar, `${at}.grammar`);
      if (value.syntax !== undefined && value.syntax !== 'ebnf') {
        throw new InputError(`${at}.syntax: the grammar engine (XGrammar) reads "ebnf" only, found ${shown(value.syntax)}`, `${at}.syntax`);
      }
      return { type: 'grammar', grammar, ...(value.syntax ? { syntax: 'ebnf' as const } : {}) };
    }
    default:
      throw new InputError(`${at}.type: expected one of ${FORMATS.join(', ')}, found ${shown(value.type)}`, `${at}.type`);
  }
}

/** tools: a non-empty list of OpenAI function tools with distinct names; undefined when absent. */
export function tools(value: unknown): ChatTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.length === 0) {
    throw new InputError(`tools: expected a non-empty array of {type: "function", function: {name, ...}}, found ${shown(value)}`, 'tools');
  }
  const seen = new Set<string>();
  return value.map((tool, i) => {
    const at = `tools[${i}]`;
    if (!isObject(tool)) throw new InputError(`${at}: expected {type: "function", function: {name, ...}}, found ${shown(tool)}`, at);
    keys(tool, ['type', 'function'], at);
    if (tool.type !== 'function') throw new InputError(`${at}.type: expected "function", found ${shown(tool.type)}`, `${at}.type`);
    const fn = tool.function;
    if (!isObject(fn)) throw new InputError(`${at}.function: expected {name, description?, parameters?, strict?}, found ${shown(fn)}`, `${at}.function`);
    keys(fn, ['name', 'description', 'parameters', 'strict'], `${at}.function`);
    const fnName = name(fn.name, `${at}.function.name`);
    if (seen.has(fnName)) throw new InputError(`${at}.function.name: ${shown(fnName)} is named by an earlier tool too`, `${at}.function.name`);
    seen.add(fnName);
    optional(fn, 'description', 'string', `${at}.function`);
    optional(fn, 'strict', 'boolean', `${at}.function`);
    schema(fn, 'parameters', `${at}.function`);
    return { type: 'function', function: fn as ChatTool['function'] };
  });
}

/** tool_choice: auto, none, required or a function of ``declared``; undefined when absent. */
export function toolChoice(value: unknown, declared: ChatTool[] | undefined): ToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  if (!declared) throw new InputError(`tool_choice: only with tools, found ${shown(value)} and no tools`, 'tool_choice');
  if (value === 'auto' || value === 'none' || value === 'required') return value;
  const names = declared.map((t) => t.function.name);
  if (isObject(value) && value.type === 'function' && isObject(value.function) && Object.keys(value).length === 2
      && Object.keys(value.function).length === 1 && typeof value.function.name === 'string') {
    if (!names.includes(value.function.name)) {
      throw new InputError(`tool_choice: no tool is named ${shown(value.function.name)} (tools: ${names.join(', ')})`, 'tool_choice');
    }
    return { type: 'function', function: { name: value.function.name } };
  }
  throw new InputError(`tool_choice: expected "auto", "none", "required" or {type: "function", function: {name}}, found ${shown(value)}`, 'tool_choice');
}

/** An assistant turn's tool_calls, each {id, type: "function", function: {name, arguments: a JSON string}}. */
export function toolCalls(value: unknown, at: string): ToolCall[] {
  if (!Array.isArray(value) || value.length === 0) throw new InputError(`${at}: expected a non-empty array of tool calls, found ${shown(value)}`, at);
  return value.map((call, j) => {
    const where = `${at}[${j}]`;
    if (!isObject(call)) throw new InputError(`${where}: expected {id, type: "function", function: {name, arguments}}, found ${shown(call)}`, where);
    keys(call, ['id', 'type', 'function'], where);
    const id = text(call.id, `${where}.id`);
    if (call.type !== 'function') throw new InputError(`${where}.type: expected "function", found ${shown(call.type)}`, `${where}.type`);
    const fn = call.function;
    if (!isObject(fn)) throw new InputError(`${where}.function: expected {name, arguments}, found ${shown(fn)}`, `${where}.function`);
    keys(fn, ['name', 'arguments'], `${where}.function`);
    const fnName = text(fn.name, `${where}.function.name`);
    if (typeof fn.arguments !== 'string') {
      throw new InputError(`${where}.function.arguments: expected a JSON string, found ${shown(fn.arguments)}`, `${where}.function.arguments`);
    }
    try {
      JSON.parse(fn.arguments);
    } catch {
      throw new InputError(`${where}.function.arguments: expected a JSON string, found ${shown(fn.arguments)} (not JSON)`, `${where}.function.arguments`);
    }
    return { id, type: 'function', function: { name: fnName, arguments: fn.arguments } };
  });
}

/** Every tool turn answers a call an earlier assistant turn made (by tool_call_id). */
export function checkToolTurns(messages: ChatMessage[]): void {
  const calls = new Set<string>();
  messages.forEach((m, i) => {
    if (m.role === 'assistant') for (const call of m.tool_calls ?? []) calls.add(call.id);
    if (m.role === 'tool' && !calls.has(m.tool_call_id)) {
      const at = `messages[${i}].tool_call_id`;
      throw new InputError(`${at}: no earlier assistant turn made a call with id ${shown(m.tool_call_id)}`
        + (calls.size ? ` (calls: ${[...calls].join(', ')})` : ' (no tool calls before it)'), at);
    }
  });
}
