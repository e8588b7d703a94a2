// A mono 16-bit PCM WAV file of float samples (what the runtime's Python writes for a whole
// speech; the pages write one for a speech cancelled part-way, and for a recording).

import type { SentenceInfo, SpeechResult } from '../protocol';

export function wavBytes(samples: Float32Array, sampleRate: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(44 + samples.length * 2);
  const view = new DataView(bytes.buffer);
  const text = (at: number, s: string) => { for (let i = 0; i < s.length; i++) bytes[at + i] = s.charCodeAt(i); };
  text(0, 'RIFF');
  view.setUint32(4, 36 + samples.length * 2, true);
  text(8, 'WAVE');
  text(12, 'fmt ');
  view.setUint32(16, 16, true);       // the fmt chunk's size
  view.setUint16(20, 1, true);        // PCM
  view.setUint16(22, 1, true);        // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);   // bytes a second
  view.setUint16(32, 2, true);        // bytes a frame
  view.setUint16(34, 16, true);       // bits a sample
  text(36, 'data');
  view.setUint32(40, samples.length * 2, true);
  for (let i = 0; i < samples.length; i++) view.setInt16(44 + i * 2, Math.round(Math.max(-1, Math.min(1, samples[i])) * 32767), true);
  return bytes;
}

/** What a speech cancelled part-way made, as the runtime reports it (finish_reason 'cancelled'):
 * the sentences received (each with its samples) summed, and the WAV of them. */
export function cancelledSpeech(parts: { samples: Float32Array; sentence: SentenceInfo }[], sampleRate: number): SpeechResult & { wav: Uint8Array<ArrayBuffer> } {
  const samples = new Float32Array(parts.reduce((n, p) => n + p.samples.length, 0));
  let at = 0;
  for (const p of parts) {
    samples.set(p.samples, at);
    at += p.samples.length;
  }
  const audio = parts.reduce((n, p) => n + p.sentence.audio_seconds, 0);
  const compute = parts.reduce((n, p) => n + p.sentence.compute_seconds, 0);
  return {
    audio_seconds: audio, compute_seconds: compute, sample_rate: sampleRate, real_time_factor: compute > 0 ? audio / compute : 0,
    finish_reason: 'cancelled', samples: samples.length, sentences: parts.map((p) => p.sentence), warnings: [],
    wav: wavBytes(samples, sampleRate),
  };
}
