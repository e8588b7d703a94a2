// Which voice the chat speaks with: the voice bundle picked (the model the 'voice' slot loads)
// and, inside it, the choice control the bundle declares (Kokoro's voice names), kept in step
// with the controls' pickers.

import type { ControlInfo } from '../protocol';
import type { BundleEntry } from '../ui/bundles';
import type { VoiceControls } from './controls';
import type { ModelSet } from './models';

export class VoiceChoice {
  /** The voice bundle the 'voice' slot has loaded (null before the first Start). */
  private loaded: BundleEntry | null = null;

  constructor(private readonly controls: VoiceControls, private readonly models: ModelSet) {}

  /** The bundle picked now (what Start loads). */
  get picked(): BundleEntry | undefined {
    return this.controls.voiceBundle;
  }

  /** A different bundle is picked than the one loaded. */
  get changed(): boolean {
    const picked = this.picked;
    return picked !== undefined && picked.url !== this.loaded?.url;
  }

  /** ``bundle`` is the one loaded now (``sync`` then offers its voices). */
  loadedAs(bundle: BundleEntry): void {
    this.loaded = bundle;
  }

  /** The controls a speech request takes: the voice picked, under its control's name. */
  requestControls(): Record<string, string> {
    const voice = this.controls.voice;
    const control = this.choiceControl();
    return voice && control ? { [control.name]: voice } : {};
  }

  /** The voice picker offers the loaded bundle's choices (hidden when it has none). */
  sync(): void {
    const control = this.choiceControl();
    this.controls.setVoices(control?.options ?? [], typeof control?.default === 'string' ? control.default : undefined);
  }

  private choiceControl(): ControlInfo | null {
    return this.models.info('voice')?.controls.find((c) => c.options.length > 0) ?? null;
  }
}
