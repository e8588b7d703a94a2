// Where the conversation is: one phase at a time, moved only along the edges below, so a late
// event (a transcript that arrives after a barge-in, a playback end after Stop) cannot put the
// page in a state that makes no sense.

export type Phase =
  | 'off' // microphone closed
  | 'listening' // waiting for the user to speak
  | 'hearing' // the user is speaking (VAD speech_start, or the talk button held)
  | 'transcribing' // the utterance is with the recogniser
  | 'thinking' // the model is writing; nothing to hear yet
  | 'speaking'; // the reply is being heard (and maybe still written)

const EDGES: Record<Phase, Phase[]> = {
  off: ['listening'],
  listening: ['hearing', 'off'],
  // back to listening: an utterance too short to transcribe
  hearing: ['transcribing', 'listening', 'off'],
  // listening: nothing was understood; hearing: the user spoke again (barge-in)
  transcribing: ['thinking', 'listening', 'hearing', 'off'],
  thinking: ['speaking', 'listening', 'hearing', 'off'],
  speaking: ['listening', 'hearing', 'off'],
};

/** Phases in which new speech interrupts the assistant. */
export const INTERRUPTIBLE: ReadonlySet<Phase> = new Set(['transcribing', 'thinking', 'speaking']);

/** Phases outside any turn: moving into one ends the turn that was running. */
const BETWEEN_TURNS: ReadonlySet<Phase> = new Set(['off', 'listening']);

export class TurnMachine {
  private current: Phase = 'off';
  /** Bumped when a turn starts (speech heard) and when it ends (back to listening, or off):
   * work that still runs for an ended turn (a transcript arriving after Stop) is stale. */
  private turnId = 0;
  onChange: (phase: Phase, previous: Phase) => void = () => {};

  get phase(): Phase {
    return this.current;
  }

  get turn(): number {
    return this.turnId;
  }

  /** Is ``turn`` still the live one (nothing ended or interrupted it)? */
  live(turn: number): boolean {
    return turn === this.turnId;
  }

  can(next: Phase): boolean {
    return EDGES[this.current].includes(next);
  }

  /** Move to ``next`` if that edge exists; false (and no change) otherwise. */
  to(next: Phase): boolean {
    if (next === this.current || !this.can(next)) return false;
    const previous = this.current;
    if (next === 'hearing' || BETWEEN_TURNS.has(next)) this.turnId++;
    this.current = next;
    this.onChange(next, previous);
    return true;
  }
}
