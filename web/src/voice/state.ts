// The voice page's state, mutated in place by the controller and read by the tests through
// window.__onnxpipeVoice.

import type { ShownError } from '../ui/format';
import type { Mode } from './controls';
import type { Span, SpanMs, Stage } from './latency';
import type { Phase } from './turn';

export interface TurnRecord {
  mode: Mode;
  /** What the recogniser heard. */
  transcript: string;
  /** What the model wrote (up to the interruption, if there was one). */
  reply: string;
  /** Seconds of the reply actually played (a barge-in cuts it short). */
  replyAudioSeconds: number;
  /** Seconds of audio the voice made for it. */
  madeAudioSeconds: number;
  /** Seconds of silence between the reply's pieces: the voice's next audio came after the last
   * had finished playing (ReplyPlayer.gapSeconds). */
  replyGapSeconds: number;
  sentences: string[];
  /** Since the end of speech, cumulative; and each stage on its own. */
  latencyMs: Partial<Record<Stage, number>>;
  stageMs: Partial<Record<Stage, number>>;
  /** The work behind the stages: each span's [start, end] in ms since the end of speech
   * (negative: before it; the prefill runs while the user speaks). */
  spansMs: Partial<Record<Span, SpanMs>>;
  /** done: heard to the end; interrupted: the user spoke over it; empty: nothing was understood. */
  finish: 'done' | 'interrupted' | 'empty' | 'failed';
  /** Seconds of speech that were transcribed. */
  speechSeconds: number;
  /** Since the end of speech, when the model finished writing (null: it never did). */
  replyDoneMs: number | null;
  /** The voice that spoke the reply: its bundle and the controls it was given (e.g. a voice name). */
  voice: { bundle: string | null; controls: Record<string, string> };
  /** Pauses the VAD took for an end, joined back into this question (tuning.ts CONTINUE_MS). */
  joined: number;
  /** The transcript began at the pause (LISTEN_PAUSE_MS of silence), before the end was decided. */
  earlyTranscript: boolean;
  /** Interrupted by speech over the reply: ms from the start of that speech to the reply's
   * playback stopped (null: not a barge-in during playback). */
  bargeInMs: number | null;
  /** The reply's prompt and how much of it the state already held (the prefill's work). */
  promptTokens: number | null;
  cachedTokens: number | null;
  /** The prefill failed (only time was lost: the reply's call read everything). */
  prefillError: string | null;
}

export interface VoiceState {
  phase: Phase;
  running: boolean; // microphone open
  loading: boolean;
  turns: TurnRecord[];
  playing: boolean;
  /** The chat model is writing a reply. */
  generating: boolean;
  /** Sample rate of the microphone device (the worklet resamples it to 16 kHz). */
  micRate: number | null;
  /** Utterances the VAD cut at a pause that were joined again (tuning.ts CONTINUE_MS). */
  joinedPauses: number;
  /** Speech over the assistant's turn too short to count (tuning.ts MIN_SPEECH_MS): the reply
   * was held while it lasted and then went on. */
  heldNoises: number;
  lastError: (ShownError & { during: string }) | null;
}

export function initialState(): VoiceState {
  return { phase: 'off', running: false, loading: false, turns: [], playing: false, generating: false, micRate: null, joinedPauses: 0, heldNoises: 0, lastError: null };
}
