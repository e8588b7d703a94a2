// The speech page's state, one plain object; exposed as window.__onnxpipeTts.state for tests.

import type { ExecutionProvider, LoadedInfo, SentenceInfo, SpeechResult } from '../protocol';
import type { ShownError } from '../ui/format';

/** idle: no voice loaded · loading · ready: can speak · speaking · stopping: cancel sent. */
export type Status = 'idle' | 'loading' | 'ready' | 'speaking' | 'stopping';

export interface SpeechEvent {
  type: 'audio' | 'heard' | 'done';
  /** performance.now() when it happened. */
  at: number;
  /** For 'audio': the piece's index in the speech. */
  index?: number;
}

export interface TtsState {
  status: Status;
  /** Bundle name, provider and WASM threads of the last load request. */
  bundle: string | null;
  ep: ExecutionProvider | null;
  threads: number;
  loaded: LoadedInfo | null;
  warnings: string[];
  /** Sentences of the running (or last) speech, in order, as their audio arrived. */
  sentences: SentenceInfo[];
  /** Samples received for the running (or last) speech. */
  samples: number;
  /** True while Web Audio is playing something. */
  playing: boolean;
  lastResult: SpeechResult | null;
  /** Size of the last WAV offered for download. */
  wavBytes: number;
  /** Milliseconds from Speak to the first audio being heard (its arrival plus the player's lead);
   * null until the first sentence of the running speech arrives. */
  firstAudioMs: number | null;
  /** What happened during the running (or last) speech, in order: each piece's audio arriving,
   * playback first heard (the playhead moved), the speech finished. */
  events: SpeechEvent[];
  lastError: (ShownError & { during: 'load' | 'speak' | 'cancel' | 'playback' }) | null;
}

export function initialState(): TtsState {
  return {
    status: 'idle', bundle: null, ep: null, threads: 1, loaded: null, warnings: [],
    sentences: [], samples: 0, playing: false, lastResult: null, wavBytes: 0,
    firstAudioMs: null, events: [], lastError: null,
  };
}
