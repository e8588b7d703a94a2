// <onnxpipe-chat bundle="…" system="…" max-new-tokens="256">: a chat box. Scripted:
// `await el.send(text)` resolves with the reply (the conversation continues across sends).

import { h } from './dom';
import { OnnxpipeElement, WidgetError } from './element';
import type { WidgetTurn } from './protocol';

const DEFAULT_MAX_NEW_TOKENS = 256;

export class OnnxpipeChat extends OnnxpipeElement {
  protected readonly kind = 'chat';
  private turns: WidgetTurn[] = [];
  private busy = false;
  private readonly log = h('div', { className: 'log', role: 'log', parts: 'log' });
  private readonly input = h('textarea', { placeholder: 'Message', rows: 2, parts: 'input' });
  private readonly sendButton = h('button', { type: 'button', textContent: 'Send', disabled: true, parts: 'send' });
  private readonly stopButton = h('button', { type: 'button', textContent: 'Stop', className: 'secondary', disabled: true, parts: 'stop' });

  protected render(): void {
    this.input.setAttribute('aria-label', 'Message');
    this.sendButton.addEventListener('click', () => this.sendFromInput());
    this.stopButton.addEventListener('click', () => this.cancel());
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        this.sendFromInput();
      }
    });
    this.body.append(this.log, this.progress.el, h('div', { className: 'row' }, this.input, this.sendButton, this.stopButton), this.status);
  }

  protected reset(): void {
    this.turns = [];
    this.log.replaceChildren();
  }

  /** Send one user turn; resolves with the assistant's reply (what was made, if cancelled). */
  async send(text: string): Promise<string> {
    if (typeof text !== 'string' || !text.trim()) throw new WidgetError('input', `send(text): expected a non-empty string, got ${JSON.stringify(text)}`);
    await this.whenReady();
    if (this.busy) throw new WidgetError('input', 'send(): a reply is still being written (await it, or cancel() first)');
    this.setBusy(true);
    const system = this.getAttribute('system');
    const maxAttr = this.getAttribute('max-new-tokens');
    const maxNewTokens = maxAttr === null ? DEFAULT_MAX_NEW_TOKENS : Number(maxAttr);
    if (!(Number.isInteger(maxNewTokens) && maxNewTokens >= 1)) {
      this.setBusy(false);
      throw new WidgetError('input', `max-new-tokens="${maxAttr}": expected a whole number >= 1`);
    }
    const user: WidgetTurn = { role: 'user', content: text };
    const messages = [...(system ? [{ role: 'system', content: system } as WidgetTurn] : []), ...this.turns, user];
    this.bubble('user', text);
    const reply = this.bubble('assistant', '');
    reply.classList.add('streaming');
    this.showStatus('Writing…');
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        this.request({ type: 'send', id: this.newId(), messages, maxNewTokens }, (m) => {
          if (m.type === 'token') {
            reply.textContent += m.text;
            this.log.scrollTop = this.log.scrollHeight;
            this.emit('onnxpipe-token', { text: m.text });
          } else if (m.type === 'replied') {
            reply.textContent = m.text;
            this.emit('onnxpipe-done', { text: m.text, finishReason: m.finishReason });
            resolve(m.text);
            return true;
          }
          return false;
        }, reject);
      });
      this.turns.push(user, { role: 'assistant', content: answer });
      this.showStatus('Ready');
      return answer;
    } catch (e) {
      reply.remove();
      this.showStatus((e as Error).message, true);
      throw e;
    } finally {
      reply.classList.remove('streaming');
      this.setBusy(false);
    }
  }

  private sendFromInput(): void {
    const text = this.input.value.trim();
    if (!text || this.sendButton.disabled) return;   // kept in the box until the model can answer
    this.input.value = '';
    this.send(text).catch(() => {});   // shown in the status line and as onnxpipe-error
  }

  private bubble(role: 'user' | 'assistant', text: string): HTMLElement {
    const el = h('div', { className: `msg ${role}`, textContent: text, parts: `message ${role}` });
    this.log.append(el);
    this.log.scrollTop = this.log.scrollHeight;
    return el;
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    this.syncControls();
  }

  /** Send waits for the model and for the reply being written; Stop only has a reply to stop. */
  protected syncControls(): void {
    this.sendButton.disabled = this.busy || !this.isReady;
    this.stopButton.disabled = !this.busy;
  }
}
