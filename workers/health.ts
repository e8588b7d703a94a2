// Is this worker's engine still usable? A wasm trap or a failed allocation leaves onnxruntime-web's
// or Pyodide's heap in an unknown state, and a lost WebGPU device takes every GPU tensor with it:
// the worker then says 'fatal' and the page's client (web/src/client.ts) starts a new worker.
// Also the Web Lock the worker holds while it lives (the page learns of its death when it is
// released) and the test-only ways to break it (gated by the 'watch' request's debug flag).

import { bridge, currentOrt } from './bridge';

/** How errors that mean "the engine is unusable" read, wherever they surface: thrown in the
 * worker, or wrapped by Python's EngineError/error_json as text ("... RuntimeError: unreachable").
 * A JS RangeError from one oversized typed array or ArrayBuffer is not among them: the engines'
 * heaps are untouched, so it fails its request and the worker goes on. */
const FATAL: [RegExp, string][] = [
  [/RuntimeError: (unreachable|memory access out of bounds|divide by zero|integer overflow|float unrepresentable|table index is out of bounds|null function)/i, 'a WebAssembly trap'],
  [/Maximum memory size exceeded|Cannot enlarge memory|Aborted\(OOM\)|out of memory/i, 'out of memory'],
  [/Pyodide has suffered a fatal error|Pyodide already fatally failed/i, "Pyodide's fatal error"],
  [/GPU ?device (was |is )?lost|Device is lost|device lost/i, 'the WebGPU device was lost'],
];

/** A short reason when ``error`` (an Error, or an error message) means the engine is unusable, else null. */
export function fatalReason(error: unknown): string | null {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  if (error instanceof WebAssembly.RuntimeError) return `a WebAssembly trap (${error.message})`;
  for (const [pattern, what] of FATAL) {
    const match = pattern.exec(message);
    if (match) return `${what} (${match[0]})`;
  }
  return null;
}

/** Hold the Web Lock ``name`` until this worker ends (the browser releases it then, also after
 * terminate()). False where there are no Web Locks (a frame without storage access). */
export function holdLock(name: string): Promise<boolean> {
  return new Promise((resolve) => {
    if (!navigator.locks) return resolve(false);
    navigator.locks.request(name, () => {
      resolve(true);
      return new Promise<void>(() => {});   // never released while the worker lives
    }).catch(() => resolve(false));
  });
}

/** A module whose one function executes wasm's `unreachable`: the same trap a broken engine raises. */
const TRAP_MODULE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
  0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x07, 0x08, 0x01, 0x04, 0x74, 0x72, 0x61, 0x70, 0x00, 0x00, // export "trap"
  0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b, // body: unreachable, end
]);

/** Test only: the next engine run (bridge.run, the call every session run goes through) does
 * ``instead`` first. */
function breakNextRun(instead: () => void): void {
  const run = bridge.run;
  bridge.run = async (...args: Parameters<typeof run>) => {
    bridge.run = run;
    instead();
    return run(...args);
  };
}

/** Test only: the next engine run traps. */
export function trapNextRun(): void {
  breakNextRun(() => {
    const instance = new WebAssembly.Instance(new WebAssembly.Module(TRAP_MODULE));
    (instance.exports.trap as () => void)();
  });
}

/** Test only: the next engine run never returns (a hang in the middle of a request). */
export function hangInNextRun(): void {
  breakNextRun(() => {
    while (Date.now() > 0);
  });
}

/** Test only: the next engine run asks for a typed array larger than any heap (a RangeError). */
export function oversizedAllocationInNextRun(): void {
  breakNextRun(() => {
    void new Float32Array(Number.MAX_SAFE_INTEGER);
  });
}

interface GpuDeviceLike {
  lost: Promise<{ reason: string; message: string }>;
  destroy(): void;
}

/** onnxruntime-web's WebGPU device (this worker loaded its WebGPU build), or null. */
async function gpuDevice(): Promise<GpuDeviceLike | null> {
  const ort = currentOrt();
  if (!ort) return null;
  return ((await ort.env.webgpu?.device) as unknown as GpuDeviceLike | undefined) ?? null;
}

let watchedDevice: GpuDeviceLike | null = null;
let deviceLost: string | null = null;

/** Call ``onLost`` when the device the sessions run on is lost (once per device). */
export async function watchGpuDevice(onLost: (reason: string) => void): Promise<void> {
  const device = await gpuDevice();
  if (!device || device === watchedDevice) return;
  watchedDevice = device;
  void device.lost.then((info) => {
    deviceLost = `the WebGPU device was lost (${info.reason}${info.message ? `: ${info.message}` : ''})`;
    onLost(deviceLost);
  });
}

/** Why the WebGPU device is gone, once it is. */
export const gpuLostReason = (): string | null => deviceLost;

/** Test only: destroy the WebGPU device, as a driver reset or a lost GPU would. */
export async function destroyGpuDevice(): Promise<void> {
  const device = await gpuDevice();
  if (!device) throw new Error('no WebGPU device: the bundle does not run on WebGPU in this worker');
  device.destroy();
}
