// An audio file (WAV, or anything the browser decodes) -> 16 kHz mono samples for the recogniser.
// The browser decodes and resamples (decodeAudioData on a 16 kHz OfflineAudioContext); the
// channels are averaged.

import { CAPTURE_RATE } from './capture-protocol';

export interface DecodedAudio {
  samples: Float32Array;
  sampleRate: number;
  /** The file's own rate and channel count, before conversion. */
  sourceChannels: number;
}

export async function decodeAudioFile(data: ArrayBuffer, rate = CAPTURE_RATE): Promise<DecodedAudio> {
  const ctx = new OfflineAudioContext(1, 1, rate);
  let buffer: AudioBuffer;
  try {
    buffer = await ctx.decodeAudioData(data);
  } catch (error) {
    throw new Error(`the file is not audio this browser can decode (${error instanceof Error ? error.message : String(error)})`);
  }
  const samples = new Float32Array(buffer.length);
  for (let c = 0; c < buffer.numberOfChannels; c++) {
    const channel = buffer.getChannelData(c);
    for (let i = 0; i < samples.length; i++) samples[i] += channel[i] / buffer.numberOfChannels;
  }
  return { samples, sampleRate: buffer.sampleRate, sourceChannels: buffer.numberOfChannels };
}
