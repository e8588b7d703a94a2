// Messages of the microphone capture: page -> worklet (commands on the node's port), worklet ->
// page (levels), worklet -> consumer (16 kHz chunks on the data port: a runtime worker, or a
// recorder in the page). Types only, shared by capture.worklet.ts, mic.ts and the worker.

/** processorOptions of the capture node. */
export interface CaptureOptions {
  rate: number; // output sample rate (16000)
  chunk: number; // samples per posted chunk (512: one VAD window at 16 kHz)
}

export type WorkletCommand =
  | { type: 'connect'; port: MessagePort } // post chunks here from now on (replaces the last port)
  | { type: 'stop' }; // post nothing more; the processor ends

/** One chunk of 16 kHz mono audio; ``at`` is its first sample's index since capture began. */
export interface ChunkMessage {
  type: 'chunk';
  samples: Float32Array;
  at: number;
}

/** The RMS of the chunk that starts at ``at`` (also posted when no data port is connected). */
export interface LevelMessage {
  type: 'level';
  rms: number;
  at: number;
}

export const CAPTURE_RATE = 16000;
export const CAPTURE_CHUNK = 512;
