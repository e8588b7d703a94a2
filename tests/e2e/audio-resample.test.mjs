// The microphone's 16 kHz downsampler (web/src/audio/resample.ts, the code the capture worklet
// runs), under node: known sines at device rates come out as the exact 16 kHz sine, content
// above 8 kHz is removed instead of folding into the speech band (as dropping samples would),
// and feeding it in 128-frame render quanta gives the same samples as one whole call.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { runnerImport } from 'vite';
import { ROOT } from './lib/browser.mjs';

const { module: rs } = await runnerImport(path.join(ROOT, 'web', 'src', 'audio', 'resample.ts'));
const OUT = 16000;
// the filter's edges: the first and last `half` output samples see the zeros before/after the signal
const EDGE = 200;

const sine = (rate, freq, seconds, amp = 0.5) =>
  Float32Array.from({ length: Math.round(rate * seconds) }, (_, i) => amp * Math.sin((2 * Math.PI * freq * i) / rate));

function maxError(y, expected) {
  let worst = 0;
  for (let i = EDGE; i < y.length - EDGE; i++) worst = Math.max(worst, Math.abs(y[i] - expected(i)));
  return worst;
}

function rms(y) {
  let sum = 0;
  for (let i = EDGE; i < y.length - EDGE; i++) sum += y[i] * y[i];
  return Math.sqrt(sum / (y.length - 2 * EDGE));
}

for (const [rate, freq] of [[48000, 1000], [48000, 3500], [44100, 1000], [44100, 3100], [22050, 440], [96000, 2000], [8000, 1000]]) {
  test(`${freq} Hz at ${rate} Hz -> the exact ${freq} Hz sine at 16 kHz`, () => {
    const y = rs.resample(sine(rate, freq, 1), rate, OUT);
    assert.equal(y.length, OUT);
    // the filter is centred on each output's instant: no delay, no phase shift
    const err = maxError(y, (n) => 0.5 * Math.sin((2 * Math.PI * freq * n) / OUT));
    assert.ok(err < 1e-4, `max error ${err}`);
  });
}

for (const [rate, freq] of [[48000, 12000], [48000, 9000], [44100, 10000], [44100, 15000]]) {
  test(`${freq} Hz at ${rate} Hz is removed, not aliased into the speech band`, () => {
    const x = sine(rate, freq, 1);
    const y = rs.resample(x, rate, OUT);
    assert.ok(rms(y) < 1e-3, `rms ${rms(y)} left of a 0.35 rms tone`);
    // what dropping samples would have done: the tone folds back at full strength
    if (rate % OUT === 0) {
      const dropped = Float32Array.from({ length: OUT }, (_, n) => x[n * (rate / OUT)]);
      assert.ok(rms(dropped) > 0.3, 'the decimated tone folds back (the filter is what removes it)');
    }
  });
}

test('streaming in 128-frame render quanta equals one whole call', () => {
  for (const rate of [48000, 44100]) {
    const x = Float32Array.from({ length: rate }, (_, i) => Math.sin(i * 0.013) * Math.cos(i * 0.0007) * 0.8);
    const r = new rs.Resampler(rate, OUT);
    const streamed = [];
    const out = new Float32Array(r.maxOutput(128));
    for (let i = 0; i < x.length; i += 128) {
      const n = r.process(x.subarray(i, i + 128), out);
      streamed.push(...out.subarray(0, n));
    }
    const whole = rs.resample(x, rate, OUT);
    // the stream holds back the filter's last `half` inputs: everything before is identical
    assert.ok(streamed.length >= OUT - Math.ceil(r.half * OUT / rate) - 1, `${streamed.length} samples streamed`);
    for (let i = 0; i < streamed.length; i++) assert.equal(streamed[i], whole[i], `sample ${i}`);
  }
});

test('unity gain at DC and bad rates refused', () => {
  const y = rs.resample(new Float32Array(48000).fill(0.25), 48000, OUT);
  assert.ok(maxError(y, () => 0.25) < 1e-6);
  assert.throws(() => new rs.Resampler(0, OUT), /positive integers/);
  assert.throws(() => new rs.Resampler(44100.5, OUT), /positive integers/);
});
