// A 'run' of a one-pass bundle (denoising, single_pass): what Python's web_entry.run emits,
// gathered into the call's result (outputs, images with their RGBA pixels and PNG files).

import type { ImageOutput, RunOutput, RunResult, StepEvent } from '../web/src/protocol';

/** A copy of ``data``'s bytes as a ``T`` (Pyodide's views may point into its heap). */
function own<T extends Uint8Array | Float32Array>(data: ArrayBufferView, make: (buffer: ArrayBuffer) => T): T {
  return make(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer);
}

/** Interleaved 1-, 3- or 4-channel pixels as RGBA (grey spread over RGB; opaque). */
export function toRgba(pixels: Uint8Array, channels: number): Uint8ClampedArray {
  if (channels === 4) return new Uint8ClampedArray(pixels.buffer.slice(pixels.byteOffset, pixels.byteOffset + pixels.byteLength));
  const count = pixels.length / channels;
  const rgba = new Uint8ClampedArray(count * 4);
  for (let i = 0; i < count; i++) {
    for (let c = 0; c < 3; c++) rgba[4 * i + c] = pixels[channels * i + (channels === 1 ? 0 : c)];
    rgba[4 * i + 3] = 255;
  }
  return rgba;
}

export class RunCollector {
  private readonly outputs: RunOutput['outputs'] = {};
  private readonly images: ImageOutput[] = [];

  /** ``onStep`` for each denoising step as Python reports it. */
  constructor(private readonly onStep: (event: StepEvent) => void) {}

  /** Python's ``emit(kind, json, data)``. */
  readonly emit = (kind: string, json: string, data?: ArrayBufferView | null): void => {
    if (kind === 'step') {
      this.onStep(JSON.parse(json) as StepEvent);
    } else if (kind === 'output') {
      const { name, shape, values } = JSON.parse(json) as { name: string; shape: number[]; values?: number[] };
      this.outputs[name] = { shape, values: values ?? own(data!, (b) => new Float32Array(b)) };
    } else if (kind === 'image') {
      const { width, height, channels } = JSON.parse(json) as { width: number; height: number; channels: number };
      const pixels = own(data!, (b) => new Uint8Array(b));
      this.images.push({ width, height, channels, pixels, rgba: toRgba(pixels, channels), png: new Uint8Array(0) });
    } else if (kind === 'png') {
      this.images[this.images.length - 1].png = own(data!, (b) => new Uint8Array(b));
    }
  };

  /** The call's result; the buffers it holds go into ``transfer``. */
  done(result: RunResult, transfer: Transferable[]): RunOutput {
    for (const o of Object.values(this.outputs)) if (o.values instanceof Float32Array) transfer.push(o.values.buffer as ArrayBuffer);
    for (const i of this.images) transfer.push(i.pixels.buffer as ArrayBuffer, i.rgba.buffer as ArrayBuffer, i.png.buffer as ArrayBuffer);
    return { result, outputs: this.outputs, images: this.images };
  }
}
