// Band-limited sample-rate conversion for the microphone (any device rate -> 16 kHz mono), in
// plain TypeScript with no DOM: it runs inside the AudioWorklet (capture.worklet.ts), in the
// transcribe page for dropped files, and under node in the tests.
//
// A polyphase windowed-sinc filter: out[n] = sum_k x[k] h(n*in/out - k), with h a Kaiser-
// windowed sinc whose cutoff sits below the lower Nyquist frequency, so content above 8 kHz
// is removed before it could fold back (dropping samples would alias it into the speech band).
// The rate ratio is reduced to P/Q; there are exactly Q filter phases, tabulated once.

export interface ResamplerOptions {
  /** Zero crossings of the sinc on each side, counted at the lower rate: the filter length. */
  zeros?: number;
  /** Kaiser window beta: 8.6 puts the stopband ~90 dB down. */
  beta?: number;
  /** The -6 dB cutoff as a fraction of the lower Nyquist frequency. */
  rolloff?: number;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** Modified Bessel function of the first kind, order 0 (power series; converges fast). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 64; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

/** Streaming resampler: feed input blocks of any length, get every output sample they complete. */
export class Resampler {
  readonly inRate: number;
  readonly outRate: number;
  /** Input samples per output sample is P/Q. */
  private readonly p: number;
  private readonly q: number;
  /** Taps reach from `half - 1` input samples before an output's time to `half` after: an
   * output waits for `half` later input samples (the filter's delay, in input samples). */
  readonly half: number;
  /** Q phases x 2*half taps, each phase normalised to unit DC gain. */
  private readonly table: Float32Array;
  /** Input history: the last 2*half samples, then the new block. */
  private buf: Float32Array;
  private bufLen = 0;
  /** Absolute index of buf[0] in the input stream. */
  private bufStart = 0;
  /** Next output sample: its index, and its time in input samples as floor + phase/Q. */
  private outIndex = 0;
  private nextFloor = 0;
  private nextPhase = 0;

  constructor(inRate: number, outRate: number, options: ResamplerOptions = {}) {
    if (!(Number.isInteger(inRate) && inRate > 0 && Number.isInteger(outRate) && outRate > 0)) {
      throw new RangeError(`Resampler: rates must be positive integers, got ${inRate} -> ${outRate}`);
    }
    const zeros = options.zeros ?? 32;
    const beta = options.beta ?? 8.6;
    const rolloff = options.rolloff ?? 0.9;
    const g = gcd(inRate, outRate);
    this.inRate = inRate;
    this.outRate = outRate;
    this.p = inRate / g;
    this.q = outRate / g;
    // cutoff in cycles per input sample; the sinc's zero crossings are 1/(2 fc) input samples apart
    const fc = (rolloff * 0.5 * Math.min(inRate, outRate)) / inRate;
    this.half = Math.ceil(zeros / (2 * fc));
    const taps = 2 * this.half;
    this.table = new Float32Array(this.q * taps);
    const norm = besselI0(beta);
    for (let phase = 0; phase < this.q; phase++) {
      const frac = phase / this.q;
      const row = phase * taps;
      let sum = 0;
      for (let j = 0; j < taps; j++) {
        // tap j weighs input sample floor + j - (half - 1); its distance from the output's time
        const t = j - (this.half - 1) - frac;
        const x = 2 * fc * t;
        const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
        const r = t / this.half;
        const window = Math.abs(r) >= 1 ? 0 : besselI0(beta * Math.sqrt(1 - r * r)) / norm;
        const h = 2 * fc * sinc * window;
        this.table[row + j] = h;
        sum += h;
      }
      for (let j = 0; j < taps; j++) this.table[row + j] /= sum;
    }
    this.buf = new Float32Array(taps * 2 + 4096);
  }

  /** Output samples that ``inputLength`` more input samples can complete (at most). */
  maxOutput(inputLength: number): number {
    return Math.ceil(((this.bufStart + this.bufLen + inputLength) * this.q) / this.p) - this.outIndex + 1;
  }

  /** Append ``input``; write the completed output samples into ``out`` from 0 and return
   * how many. ``out`` must hold maxOutput(input.length) samples. Allocates nothing in the
   * steady state, so it is safe on the audio thread. */
  process(input: Float32Array, out: Float32Array): number {
    this.append(input);
    const taps = 2 * this.half;
    const end = this.bufStart + this.bufLen; // one past the last input sample held
    let n = 0;
    // an output needs inputs up to floor + half
    while (this.nextFloor + this.half < end) {
      const first = this.nextFloor - (this.half - 1) - this.bufStart;
      const row = this.nextPhase * taps;
      let acc = 0;
      for (let j = 0; j < taps; j++) {
        const i = first + j;
        // before the stream started the input is silence
        if (i >= 0) acc += this.buf[i] * this.table[row + j];
      }
      out[n++] = acc;
      this.outIndex++;
      this.nextPhase += this.p;
      this.nextFloor += Math.floor(this.nextPhase / this.q);
      this.nextPhase %= this.q;
    }
    this.trim();
    return n;
  }

  private append(input: Float32Array): void {
    if (this.bufLen + input.length > this.buf.length) {
      const bigger = new Float32Array(Math.max(this.buf.length * 2, this.bufLen + input.length));
      bigger.set(this.buf.subarray(0, this.bufLen));
      this.buf = bigger;
    }
    this.buf.set(input, this.bufLen);
    this.bufLen += input.length;
  }

  /** Keep only the history the next output still needs. */
  private trim(): void {
    const keepFrom = this.nextFloor - (this.half - 1) - this.bufStart;
    if (keepFrom <= 0) return;
    const drop = Math.min(keepFrom, this.bufLen);
    this.buf.copyWithin(0, drop, this.bufLen);
    this.bufLen -= drop;
    this.bufStart += drop;
  }
}

/** Resample a whole signal (a file): the output has round(length * out / in) samples, the
 * tail flushed with silence so the last samples are complete. */
export function resample(samples: Float32Array, inRate: number, outRate: number, options?: ResamplerOptions): Float32Array {
  if (inRate === outRate) return samples.slice();
  const r = new Resampler(inRate, outRate, options);
  const want = Math.round((samples.length * outRate) / inRate);
  const padded = new Float32Array(samples.length + r.half + 1);
  padded.set(samples);
  const out = new Float32Array(r.maxOutput(padded.length));
  const n = r.process(padded, out);
  return out.slice(0, Math.min(want, n));
}
