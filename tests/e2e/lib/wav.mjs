// WAV files for the headless runner and the tests, read as py/onnxpipe/audio/wav.py reads them:
// 16-bit PCM (v / 32767) or 32-bit float, channels averaged into one.
import fs from 'node:fs';

/** { samples: Float32Array (mono), sampleRate } of a .wav file. */
export function readWav(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') {
    throw new Error(`${file}: not a WAV file (no RIFF/WAVE header)`);
  }
  let fmt = null;
  let data = null;
  for (let pos = 12; pos + 8 <= buf.length;) {
    const tag = buf.toString('latin1', pos, pos + 4);
    const size = buf.readUInt32LE(pos + 4);
    const body = buf.subarray(pos + 8, Math.min(pos + 8 + size, buf.length));
    if (tag === 'fmt ') fmt = { kind: body.readUInt16LE(0), channels: body.readUInt16LE(2), rate: body.readUInt32LE(4), bits: body.readUInt16LE(14) };
    else if (tag === 'data') data = body;
    pos += 8 + size + (size & 1);
  }
  if (!fmt || !data) throw new Error(`${file}: WAV file without a fmt or data chunk`);
  let values;
  if (fmt.kind === 1 && fmt.bits === 16) {
    values = new Float64Array(data.length >> 1);
    for (let i = 0; i < values.length; i++) values[i] = data.readInt16LE(2 * i) / 32767;
  } else if (fmt.kind === 3 && fmt.bits === 32) {
    values = new Float64Array(data.length >> 2);
    for (let i = 0; i < values.length; i++) values[i] = data.readFloatLE(4 * i);
  } else {
    throw new Error(`${file}: only 16-bit PCM or 32-bit float WAV is read here, found format ${fmt.kind} with ${fmt.bits} bits`);
  }
  const n = Math.floor(values.length / fmt.channels);
  const samples = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let c = 0; c < fmt.channels; c++) sum += values[i * fmt.channels + c];
    samples[i] = sum / fmt.channels;
  }
  return { samples, sampleRate: fmt.rate };
}
