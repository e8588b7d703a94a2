// The voice page's controls: Start/Stop, hands-free or push-to-talk, the talk button (held
// while speaking), barge-in on/off, and the voice picker (a voice bundle, and a voice within
// it when the bundle offers a choice).

import { el, labelled } from '../ui/dom';
import type { BundleEntry } from '../ui/bundles';

export type Mode = 'hands-free' | 'push-to-talk';

export interface ControlActions {
  start: () => void;
  stop: () => void;
  talkDown: () => void;
  talkUp: () => void;
  voiceChanged: () => void;
  modeChanged: () => void;
}

export class VoiceControls {
  readonly root: HTMLElement;
  private readonly startButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly talkButton: HTMLButtonElement;
  private readonly handsFree: HTMLInputElement;
  private readonly bargeIn: HTMLInputElement;
  private readonly bundleSelect: HTMLSelectElement;
  private readonly voiceSelect: HTMLSelectElement;
  private readonly voiceField: HTMLElement;
  private bundles: BundleEntry[] = [];
  private holding = false;

  constructor(actions: ControlActions) {
    this.startButton = el('button', { type: 'button', class: 'primary', 'data-testid': 'voice-start', text: 'Start' });
    this.stopButton = el('button', { type: 'button', 'data-testid': 'voice-stop', text: 'Stop', disabled: true });
    this.talkButton = el('button', {
      type: 'button', class: 'voice-talk', 'data-testid': 'voice-talk', text: 'Hold to talk', disabled: true,
      'aria-pressed': 'false',
    });
    this.handsFree = el('input', { type: 'radio', name: 'voice-mode', value: 'hands-free', checked: true, 'data-testid': 'voice-mode-hands-free' });
    const ptt = el('input', { type: 'radio', name: 'voice-mode', value: 'push-to-talk', 'data-testid': 'voice-mode-ptt' });
    this.bargeIn = el('input', { type: 'checkbox', checked: true, 'data-testid': 'voice-barge-in' });
    this.bundleSelect = el('select', { 'data-testid': 'voice-bundle', name: 'voice-bundle' });
    this.voiceSelect = el('select', { 'data-testid': 'voice-voice', name: 'voice' });
    this.voiceField = labelled('Voice', this.voiceSelect);
    this.voiceField.hidden = true;

    this.startButton.addEventListener('click', actions.start);
    this.stopButton.addEventListener('click', actions.stop);
    const down = (event: Event) => {
      event.preventDefault();
      if (this.holding || this.talkButton.disabled) return;
      this.holding = true;
      this.talkButton.setAttribute('aria-pressed', 'true');
      actions.talkDown();
    };
    const up = () => {
      if (!this.holding) return;
      this.holding = false;
      this.talkButton.setAttribute('aria-pressed', 'false');
      actions.talkUp();
    };
    this.talkButton.addEventListener('pointerdown', down);
    this.talkButton.addEventListener('pointerup', up);
    this.talkButton.addEventListener('pointerleave', up);
    this.talkButton.addEventListener('pointercancel', up);
    // the space bar works the talk button from the keyboard
    this.talkButton.addEventListener('keydown', (e) => { if (e.key === ' ' && !e.repeat) down(e); });
    this.talkButton.addEventListener('keyup', (e) => { if (e.key === ' ') up(); });
    for (const radio of [this.handsFree, ptt]) {
      radio.addEventListener('change', () => {
        this.syncMode();
        actions.modeChanged();
      });
    }
    this.bundleSelect.addEventListener('change', actions.voiceChanged);
    this.voiceSelect.addEventListener('change', actions.voiceChanged);

    this.root = el('section', { class: 'voice-controls', 'aria-label': 'Voice chat controls' },
      el('div', { class: 'voice-buttons' }, this.startButton, this.stopButton, this.talkButton),
      el('fieldset', { class: 'mode' },
        el('legend', { text: 'Listening' }),
        el('label', { class: 'radio' }, this.handsFree, ' Hands-free (stops when you stop talking)'),
        el('label', { class: 'radio' }, ptt, ' Push to talk')),
      el('label', { class: 'checkbox' }, this.bargeIn, ' Speaking interrupts the reply'),
      labelled('Voice bundle', this.bundleSelect),
      this.voiceField);
    this.syncMode();
  }

  get mode(): Mode {
    return this.handsFree.checked ? 'hands-free' : 'push-to-talk';
  }

  get bargeInEnabled(): boolean {
    return this.bargeIn.checked;
  }

  setVoiceBundles(bundles: BundleEntry[]): void {
    this.bundles = bundles;
    this.bundleSelect.replaceChildren(...bundles.map((b) => el('option', { value: b.name, text: b.label })));
  }

  get voiceBundle(): BundleEntry | undefined {
    return this.bundles.find((b) => b.name === this.bundleSelect.value) ?? this.bundles[0];
  }

  /** The choices of the loaded voice bundle's voice control (none: the field is hidden); the
   * voice picked stays picked while it is offered, else ``fallback`` (the bundle's default). */
  setVoices(choices: string[], fallback?: string): void {
    const current = this.voiceSelect.value;
    const keep = choices.includes(current) ? current : fallback;
    this.voiceSelect.replaceChildren(...choices.map((c) => el('option', { value: c, text: c })));
    if (keep !== undefined && choices.includes(keep)) this.voiceSelect.value = keep;
    this.voiceField.hidden = choices.length === 0;
  }

  get voice(): string | undefined {
    return this.voiceField.hidden ? undefined : this.voiceSelect.value || undefined;
  }

  /** Enable what makes sense: running (mic open) or not, and busy while models load. */
  setRunning(running: boolean, busy: boolean): void {
    this.startButton.disabled = running || busy;
    this.stopButton.disabled = !running;
    this.bundleSelect.disabled = busy;
    this.voiceSelect.disabled = busy;
    this.running = running;
    this.syncMode();
  }

  private running = false;

  private syncMode(): void {
    this.talkButton.disabled = !this.running || this.mode !== 'push-to-talk';
    this.talkButton.hidden = this.mode !== 'push-to-talk';
  }
}
