// The text box with Speak / Play / Stop. Ctrl+Enter (or Cmd+Enter) speaks.

import { el } from '../ui/dom';

export interface SpeechFormActions {
  speak: () => void;
  play: () => void;
  stop: () => void;
}

export const DEFAULT_TEXT =
  'Hello from onnxpipe. This voice is computed on your own computer, inside the browser tab. ' +
  'Change the text or the voice settings, then press Speak.';

export interface FormMode {
  /** A voice is loaded and nothing is being made. */
  canSpeak: boolean;
  speaking: boolean;
  playing: boolean;
  /** There is audio to play again. */
  hasTake: boolean;
}

export class SpeechForm {
  readonly root: HTMLFormElement;
  private readonly input: HTMLTextAreaElement;
  private readonly speakButton: HTMLButtonElement;
  private readonly playButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private canSpeak = false;

  constructor(actions: SpeechFormActions, extra: HTMLElement) {
    this.input = el('textarea', {
      class: 'tts-text', 'data-testid': 'tts-text', rows: 5, name: 'text', 'aria-label': 'Text to speak',
      'aria-describedby': 'tts-hint', spellcheck: true,
    });
    this.input.value = DEFAULT_TEXT;
    this.speakButton = el('button', { type: 'submit', class: 'primary', 'data-testid': 'tts-speak', text: 'Speak', disabled: true });
    this.playButton = el('button', { type: 'button', 'data-testid': 'tts-play', text: 'Play again', disabled: true });
    this.stopButton = el('button', { type: 'button', 'data-testid': 'tts-stop', text: 'Stop', disabled: true });
    this.root = el('form', { class: 'composer tts-form', 'aria-label': 'Text to speak' },
      this.input,
      el('div', { class: 'composer-actions' },
        el('span', { id: 'tts-hint', class: 'hint', text: 'Ctrl+Enter to speak' }),
        extra, this.playButton, this.stopButton, this.speakButton));

    this.root.addEventListener('submit', (event) => {
      event.preventDefault();
      if (this.canSpeak) actions.speak();
    });
    this.input.addEventListener('keydown', (event) => {
      if (event.key !== 'Enter' || !(event.ctrlKey || event.metaKey) || event.isComposing) return;
      event.preventDefault();
      if (this.canSpeak) actions.speak();
    });
    this.playButton.addEventListener('click', () => actions.play());
    this.stopButton.addEventListener('click', () => actions.stop());
  }

  get value(): string {
    return this.input.value;
  }

  set value(text: string) {
    this.input.value = text;
  }

  focus(): void {
    this.input.focus();
  }

  /** The text stays editable while speaking; the next Speak takes it. */
  setMode(mode: FormMode): void {
    this.canSpeak = mode.canSpeak;
    this.speakButton.disabled = !mode.canSpeak;
    this.playButton.disabled = !mode.canSpeak || !mode.hasTake || mode.playing;
    this.stopButton.disabled = !mode.speaking && !mode.playing;
    this.root.dataset.speaking = String(mode.speaking);
    this.root.dataset.playing = String(mode.playing);
  }
}
