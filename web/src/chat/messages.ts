// The conversation as bubbles; the assistant bubble being written is an aria-live region.

import type { ChatMessage, ToolCall } from '../protocol';
import { el } from '../ui/dom';

type Role = ChatMessage['role'];

const WHO: Record<Role, string> = { user: 'You', assistant: 'Assistant', system: 'System', tool: 'Tool' };

/** A tool call as a block of its own: the function's name and its arguments pretty-printed
 * (as sent when they are not JSON). */
export function toolCallBlock(call: ToolCall): HTMLElement {
  let args = call.function.arguments;
  try {
    args = JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    // shown as the model wrote them
  }
  return el('div', { class: 'tool-call', 'data-testid': 'tool-call', 'data-name': call.function.name, 'data-id': call.id },
    el('div', { class: 'tool-call-head' }, el('span', { class: 'tool-call-label', text: 'Tool call' }), ' ',
      el('code', { class: 'tool-call-name', 'data-testid': 'tool-call-name', text: call.function.name })),
    el('pre', { class: 'tool-call-args', 'data-testid': 'tool-call-args', text: args }));
}

/** One message bubble; text is always set as textContent (model output is never HTML). */
export class Bubble {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;

  constructor(readonly role: Role, text: string, streaming: boolean) {
    this.body = el('div', { class: 'msg-body', text });
    if (streaming) {
      this.body.setAttribute('aria-live', 'polite');
      this.body.setAttribute('aria-busy', 'true');
    }
    this.root = el('article', {
      class: `msg msg-${role}${streaming ? ' streaming' : ''}`,
      'data-testid': 'message', 'data-role': role, 'aria-label': WHO[role],
    }, el('div', { class: 'msg-who', 'aria-hidden': 'true', text: WHO[role] }), this.body);
  }

  get text(): string {
    return this.body.textContent ?? '';
  }

  append(text: string): void {
    this.body.append(text);
  }

  /** End streaming; `text` is the authoritative final text, `note` a marker such as "stopped",
   * `calls` the tool calls the reply made (each shown as a block after the text). */
  finish(text: string, note?: string, calls: ToolCall[] = []): void {
    this.body.removeAttribute('aria-live');
    this.body.removeAttribute('aria-busy');
    this.root.classList.remove('streaming');
    if (this.text !== text) this.body.textContent = text;
    if (!text) this.root.classList.add('empty');
    if (calls.length) this.root.append(...calls.map(toolCallBlock));
    if (note) {
      this.root.dataset.note = note;
      this.root.append(el('div', { class: 'msg-note', text: note }));
    }
  }

  remove(): void {
    this.root.remove();
  }
}

export class MessageList {
  readonly root: HTMLElement;
  private readonly empty: HTMLElement;

  constructor() {
    this.empty = el('p', { class: 'messages-empty', 'data-testid': 'messages-empty', text: 'Load a model, then type a message below.' });
    this.root = el('section', {
      class: 'messages', 'data-testid': 'messages', 'aria-label': 'Conversation', tabindex: 0,
    }, this.empty);
  }

  /** Change what the empty conversation says (shown until the first message). */
  prompt(text: string): void {
    this.empty.textContent = text;
  }

  add(role: Role, text: string, streaming = false): Bubble {
    const bubble = new Bubble(role, text, streaming);
    this.empty.remove();
    this.root.append(bubble.root);
    this.scrollToEnd(true);
    return bubble;
  }

  clear(): void {
    this.root.replaceChildren(this.empty);
  }

  /** Follow the stream only while the reader is already at the bottom. */
  scrollToEnd(force = false): void {
    const nearBottom = this.root.scrollHeight - this.root.scrollTop - this.root.clientHeight < 80;
    if (force || nearBottom) this.root.scrollTop = this.root.scrollHeight;
  }
}
