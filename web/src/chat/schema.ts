// The "JSON schema" box: a schema the reply must follow (response_format json_schema). Empty
// means free text; text that is not a JSON object is shown as an inline error and sends nothing.

import type { ResponseFormat } from '../protocol';
import { el } from '../ui/dom';

/** The name the page gives the schema (OpenAI's json_schema.name). */
const NAME = 'chat_reply';

export class SchemaBox {
  readonly root: HTMLDetailsElement;
  private readonly input: HTMLTextAreaElement;
  private readonly error: HTMLElement;

  constructor() {
    this.input = el('textarea', {
      class: 'schema-input', rows: 6, spellcheck: false, name: 'json_schema', 'data-testid': 'json-schema',
      placeholder: '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}',
      'aria-describedby': 'json-schema-error',
    });
    this.error = el('p', { class: 'schema-error', id: 'json-schema-error', 'data-testid': 'json-schema-error', role: 'alert', hidden: true });
    this.input.addEventListener('input', () => this.showError(null));
    this.root = el('details', { class: 'schema', 'data-testid': 'schema' },
      el('summary', { text: 'JSON schema' }),
      el('label', { class: 'field' },
        el('span', { class: 'field-hint', text: 'The reply is JSON that follows this schema; empty = free text' }),
        this.input),
      this.error);
  }

  /** The schema's text (tests and the page may set it). */
  get value(): string {
    return this.input.value;
  }

  set value(text: string) {
    this.input.value = text;
    this.showError(null);
  }

  /** The turn's response_format: undefined for free text, null (with the error shown) when the
   * box holds no JSON object. */
  read(): ResponseFormat | undefined | null {
    const text = this.input.value.trim();
    if (!text) return undefined;
    let schema: unknown;
    try {
      schema = JSON.parse(text);
    } catch (e) {
      return this.fail(`Not JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
      return this.fail(`Expected a JSON Schema object such as {"type": "object"}, found ${Array.isArray(schema) ? 'an array' : JSON.stringify(schema)}`);
    }
    return { type: 'json_schema', json_schema: { name: NAME, schema: schema as Record<string, unknown>, strict: true } };
  }

  private fail(message: string): null {
    this.root.open = true;
    this.showError(message);
    this.input.focus();
    return null;
  }

  private showError(message: string | null): void {
    this.error.textContent = message ?? '';
    this.error.hidden = message === null;
    this.input.toggleAttribute('aria-invalid', message !== null);
  }
}
