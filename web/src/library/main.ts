// "onnxpipe as a library": a chat written only against the public engine API (web/src/engine/),
// as an app that installs onnxpipe would write it. The official `openai` client is here too,
// pointed at the same engine through engine.fetch (no server), for the page's own checks.

import '../styles.css';
import OpenAI from 'openai';
import { createEngine, type Engine, type Progress } from '../engine';
import { el, labelled } from '../ui/dom';

const DEFAULT_MODEL = new URL('models/smollm2-135m-instruct/', self.location.href).href;

declare global {
  interface Window {
    __onnxpipeLibrary?: { engine: Engine; openai: OpenAI };
  }
}

function progressText(p: Progress): string {
  return p.total > 0 ? `${p.file}: ${Math.round((p.loaded / p.total) * 100)}%` : p.file;
}

async function main(): Promise<void> {
  const app = document.getElementById('app') as HTMLElement;
  const status = el('p', { 'data-testid': 'library-status', text: 'Starting the runtime…' });
  const model = el('input', { type: 'text', value: DEFAULT_MODEL, 'data-testid': 'library-model', size: 60 });
  const question = el('input', { type: 'text', value: 'What is the capital of France?', 'data-testid': 'library-question', size: 60 });
  const ask = el('button', { type: 'button', class: 'primary', disabled: true, 'data-testid': 'library-ask', text: 'Ask' });
  const stop = el('button', { type: 'button', disabled: true, 'data-testid': 'library-stop', text: 'Stop' });
  const answer = el('p', { 'data-testid': 'library-answer' });
  app.append(el('div', { class: 'app' },
    el('header', { class: 'app-header' },
      el('h1', { text: 'onnxpipe as a library' }),
      el('p', { class: 'tagline', text: 'A chat on the OpenAI-shaped engine: createEngine, chat.completions.create with stream: true, an AbortSignal for Stop (docs/library.md)' })),
    el('main', { class: 'library' },
      labelled('Model (a bundle URL)', model), labelled('Question', question),
      el('div', { class: 'library-buttons' }, ask, stop), status, answer)));

  const engine = await createEngine({ onProgress: (p) => { status.textContent = progressText(p); } });
  window.__onnxpipeLibrary = {
    engine,
    openai: new OpenAI({ apiKey: 'local', baseURL: 'http://onnxpipe.local/v1', fetch: engine.fetch, dangerouslyAllowBrowser: true }),
  };
  status.textContent = 'Ready: the model loads with the first question.';
  ask.disabled = false;
  let controller: AbortController | null = null;
  ask.addEventListener('click', async () => {
    controller = new AbortController();
    ask.disabled = true;
    stop.disabled = false;
    answer.textContent = '';
    status.textContent = 'Answering…';
    try {
      const stream = await engine.chat.completions.create({
        model: model.value, messages: [{ role: 'user', content: question.value }], stream: true, max_tokens: 128,
      }, { signal: controller.signal });
      for await (const chunk of stream) answer.textContent += chunk.choices[0]?.delta?.content ?? '';
      status.textContent = 'Done.';
    } catch (error) {
      status.textContent = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    } finally {
      ask.disabled = false;
      stop.disabled = true;
    }
  });
  stop.addEventListener('click', () => controller?.abort());
}

void main();
