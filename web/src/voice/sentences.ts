// Streamed reply text -> sentences to speak, each handed out as soon as it is complete, so the
// voice starts on the first sentence while the model is still writing the next.
//
// A sentence ends at . ! ? … (with any closing quotes or brackets) once whitespace follows, or
// at a line break. "3.14", "e.g." or "Dr." do not end one: a digit or letter follows the dot, or
// the word is a known abbreviation or a single initial. A sentence that runs on past
// `maxChars` (the first one: `firstMaxChars`) is cut at its last clause break (, ; :) so the
// voice never waits too long. With `firstClauseMinChars`, the reply's first piece goes out at its
// first clause break once it holds that many characters ("Sure," alone sounds clipped), so
// the voice starts on the first clause instead of the first sentence. With `firstWordCutChars`
// (N), a first piece with no sentence end or clause break within N characters is cut at a word
// boundary instead: at the last space within N characters, or, when fewer than `MIN_CUT_WORDS`
// words lie before it, at the first space past them; never inside a word (the voice makes a
// whole piece before its first sound, in a time that grows with the piece: docs/voice.md).

const END = /[.!?…]/;
const CLOSERS = /["'”’)\]]/;
const CLAUSE_BREAK = /[,;:]["'”’)\]]*\s/g;
/** A first piece cut at a word boundary holds at least this many words. */
const MIN_CUT_WORDS = 3;
// lower-cased, without the dot
const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'dr', 'prof', 'sr', 'jr', 'st', 'vs', 'etc', 'e.g', 'i.e', 'approx', 'no', 'fig', 'inc', 'ltd', 'co',
  'mt', 'jan', 'feb', 'mar', 'apr', 'jun', 'jul', 'aug', 'sep', 'sept', 'oct', 'nov', 'dec', 'a.m', 'p.m', 'u.s',
]);

export interface SplitterOptions {
  /** Past this many characters without an end, cut at the last clause break (0: never). */
  maxChars?: number;
  /** The same for the first piece only, so the voice can start sooner (0: like the rest). */
  firstMaxChars?: number;
  /** The first piece ends at its first clause break that many characters in (0: off). */
  firstClauseMinChars?: number;
  /** The first piece is cut at a word boundary when no end or clause break comes within that
   * many characters (0: off). */
  firstWordCutChars?: number;
}

/** Is the '.' at ``dot`` (in ``text``) the end of an abbreviation or an initial? */
function abbreviationAt(text: string, dot: number): boolean {
  let start = dot;
  while (start > 0 && /[A-Za-z.]/.test(text[start - 1])) start--;
  const word = text.slice(start, dot).toLowerCase();
  if (word.length === 1 && /[a-z]/.test(word)) return true; // "J. R. R. Tolkien"
  return ABBREVIATIONS.has(word);
}

/** Where to cut ``text``'s first piece at a word (the index of a space; -1: not yet): the last
 * space at most ``bound`` characters past ``lead`` with MIN_CUT_WORDS words before it, else the
 * first space past that many words. */
function wordCut(text: string, lead: number, bound: number): number {
  let words = 0;
  let best = -1;
  for (let i = lead + 1; i < text.length; i++) {
    if (!/\s/.test(text[i]) || /\s/.test(text[i - 1])) continue;
    words++;
    if (words < MIN_CUT_WORDS) continue;
    if (i - lead <= bound) best = i;
    else return best > 0 ? best : i;
  }
  return best;
}

export class SentenceSplitter {
  private buffer = '';
  private readonly maxChars: number;
  private readonly firstMaxChars: number;
  private readonly firstClauseMinChars: number;
  private readonly firstWordCutChars: number;
  private emitted = 0;

  constructor(options: SplitterOptions = {}) {
    this.maxChars = options.maxChars ?? 160;
    this.firstMaxChars = options.firstMaxChars ?? 0;
    this.firstClauseMinChars = options.firstClauseMinChars ?? 0;
    this.firstWordCutChars = options.firstWordCutChars ?? 0;
  }

  /** Add streamed text; returns the sentences it completed (trimmed, non-empty), in order. */
  push(text: string): string[] {
    this.buffer += text;
    return this.drain();
  }

  /** The pieces the buffer completes (push's work; again after a word cut, for the rest). */
  private drain(): string[] {
    const done: string[] = [];
    // the first piece's length bound (firstWordCutChars), from its first non-space character
    const bound = this.emitted === 0 && this.firstWordCutChars > 0 ? this.firstWordCutChars : 0;
    const lead = this.buffer.length - this.buffer.trimStart().length;
    let from = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const ch = this.buffer[i];
      let end = -1; // index one past the sentence's last character
      if (ch === '\n') {
        end = i;
      } else if (END.test(ch)) {
        let j = i + 1;
        while (j < this.buffer.length && (END.test(this.buffer[j]) || CLOSERS.test(this.buffer[j]))) j++;
        if (j >= this.buffer.length) break; // wait: the next character decides
        const listNumber = ch === '.' && /^\s*\d+$/.test(this.buffer.slice(from, i)); // "1. " opens a list item
        const abbreviation = ch === '.' && j === i + 1 && abbreviationAt(this.buffer, i);
        if (/\s/.test(this.buffer[j]) && !listNumber && !abbreviation) end = j;
        i = j - 1;
      }
      if (end >= 0) {
        // a first sentence longer than the bound is cut at a word instead (below)
        if (bound && done.length === 0 && end - lead > bound) break;
        const sentence = this.buffer.slice(from, end).trim();
        if (sentence) done.push(sentence);
        from = end;
      }
    }
    this.buffer = this.buffer.slice(from);
    if (this.emitted + done.length === 0 && this.firstClauseMinChars > 0) {
      for (const m of this.buffer.matchAll(CLAUSE_BREAK)) {
        const cut = m.index + m[0].length - 1;
        const clause = this.buffer.slice(0, cut).trim();
        if (clause.length < this.firstClauseMinChars) continue;
        if (bound && cut - lead > bound) break;
        done.push(clause);
        this.buffer = this.buffer.slice(cut);
        break;
      }
    }
    if (bound && this.emitted + done.length === 0 && this.buffer.length - lead > bound) {
      const cut = wordCut(this.buffer, lead, bound);
      if (cut > 0) {
        done.push(this.buffer.slice(0, cut).trim());
        this.buffer = this.buffer.slice(cut);
        this.emitted += done.length;
        return done.concat(this.drain());
      }
    }
    const limit = this.emitted + done.length === 0 && this.firstMaxChars > 0 ? this.firstMaxChars : this.maxChars;
    if (limit > 0 && this.buffer.length > limit) {
      // the last , ; or : (with any closing quotes) that whitespace follows
      let cut = -1;
      for (const m of this.buffer.matchAll(CLAUSE_BREAK)) cut = m.index + m[0].length - 1;
      if (cut > 0) {
        const clause = this.buffer.slice(0, cut).trim();
        if (clause) done.push(clause);
        this.buffer = this.buffer.slice(cut);
      }
    }
    this.emitted += done.length;
    return done;
  }

  /** The text left at the end of the stream (the last sentence may lack its full stop). */
  flush(): string[] {
    const rest = this.buffer.trim();
    this.buffer = '';
    return rest ? [rest] : [];
  }

  /** Forget what was pushed (a new reply). */
  reset(): void {
    this.buffer = '';
    this.emitted = 0;
  }
}

/** Markdown and list markers a chat model writes that a voice should not read out. */
export function speakable(sentence: string): string {
  return sentence
    .replace(/`+/g, '')
    .replace(/\*\*|__|\*|~~/g, '')
    .replace(/^\s*(#{1,6}|[-*+•]|\d+[.)])\s+/, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\s+/g, ' ')
    .trim();
}
