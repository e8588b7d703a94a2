// The numbers the voice chat's turn-taking and reply are tuned by, each measured or argued in
// docs/voice.md: what counts as speech, when a pause continues the question, how soon the
// reply's first piece goes to the voice.

import type { ChatParams } from '../engine/chat-params';

/** Greedy, short, not repeating itself. */
export const REPLY_PARAMS: Partial<ChatParams> = { temperature: 0, max_completion_tokens: 160, repetition_penalty: 1.1 };
/** Utterances shorter than this are coughs and clicks, not questions. */
export const MIN_SPEECH_S = 0.25;
/** The same in ms, applied here: the VAD reports speech sooner (LISTEN_CONTROLS.min_speech_ms)
 * so that a reply can be held at once, and the page decides whether it was speech. */
export const MIN_SPEECH_MS = 250;
/** Speech over the assistant's turn that has not yet lasted MIN_SPEECH_MS: the VAD's end of it
 * comes within MIN_SPEECH_MS - min_speech_ms + min_silence_ms of its report if it was shorter,
 * so no end by then (plus this margin for the worker's trip) means it lasted (docs/voice.md,
 * "Barge-in"). */
export const CONFIRM_SLACK_MS = 150;
/** Speech that resumes within this many ms of the end of speech, having begun before any of the
 * reply was heard, continues the same question (a pause mid-question is not its end): the
 * turn begun on the first part is dropped and the whole utterance is transcribed. The VAD's
 * hangover stays short for the answer's sake (docs/voice.md, "End of speech"). */
export const CONTINUE_MS = 1500;
/** The reply's first clause goes to the voice once it holds this many characters. */
export const FIRST_CLAUSE_MIN_CHARS = 20;
/** ... and is cut at a word when no sentence end or clause break comes within this many: the
 * voice makes a whole piece before its first sound, in a time that grows with the piece's
 * length (docs/voice.md, "The first piece to the voice"). */
export const FIRST_PIECE_MAX_CHARS = 30;
