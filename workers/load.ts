// The 'load' verb: start the runtime (if a 'boot' did not), fetch, verify and store the bundle's
// files (bundle-loader.ts), write the small ones into Pyodide's file system, and open the
// sessions in Python; 'progress' events all along.

import type { ArgsOf, LoadedInfo, ProgressEvent } from '../web/src/protocol';
import { BOOT_STEPS, Stages, bootStepsDone, now } from './boot';
import { files, useCancelBuffer } from './bridge';
import { bundleLock, loadBundle } from './bundle-loader';
import type { Call } from './call';
import { CallError } from './call';
import { watchGpuDevice } from './health';
import { type Runtime, startRuntime } from './runtime';

/** What the runtime started with and how a load reports, from runtime.worker.ts. */
export interface LoadHooks {
  /** The engine became unusable later (its WebGPU device lost): tell the page. */
  fatal(reason: string): void;
}

async function availableProviders(runtime: Runtime): Promise<string[]> {
  if (!runtime.webgpuBuild) return ['wasm'];   // the plain WASM build was loaded for this worker
  const gpu = (navigator as WorkerNavigator & { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
  const adapter = gpu ? await gpu.requestAdapter().catch(() => null) : null;
  return adapter ? ['webgpu', 'wasm'] : ['wasm'];
}

export async function load(args: ArgsOf<'load'>, call: Call, hooks: LoadHooks): Promise<LoadedInfo> {
  if (typeof args.bundle_url !== 'string' || !args.bundle_url) {
    throw new CallError('input', `load: "bundle_url" must be a URL string, found ${JSON.stringify(args.bundle_url) ?? 'none'}`);
  }
  const progress = (event: ProgressEvent): void => call.emit('progress', event);
  const requested = now();
  const { runtime: started, stages: bootStages } = startRuntime(args.threads, args.ep);
  // the bundle's files are read once the runtime is up: reading them from storage while
  // Pyodide and onnxruntime-web start hung now and then (a small file's read never returned,
  // ~1 load in 10 in tests/e2e/fixtures.test.mjs), and it saved only tens of ms
  await reportBoot(progress, started, bootStages);
  const runtime = await started;
  const { py, entry } = runtime;
  const stages = new Stages();
  let filesFrom = now();
  useCancelBuffer(args.cancel_buffer);
  const base = new URL(args.bundle_url.endsWith('/') ? args.bundle_url : `${args.bundle_url}/`, self.location.href);
  const warnings: string[] = [];
  const name = base.pathname.split('/').filter(Boolean).pop() ?? 'bundle';
  const dir = `/bundles/${name}`;
  const options: Record<string, unknown> = {
    dir, ep: args.ep, variant: args.variant, dtype: args.dtype, available: await availableProviders(runtime),
    expand_weights: args.expand_weights, context_length: args.context_length, heaps: args.heaps,
  };
  const write = (path: string, data: Uint8Array): void => {
    const target = `${dir}/${path}`;
    py.FS.mkdirTree(target.slice(0, target.lastIndexOf('/')));
    py.FS.writeFile(target, data);
  };
  files.clear();
  // held until the sessions have read the stored files (bundle-loader.ts, bundleLock)
  return underLock(bundleLock(base), async () => {
    filesFrom = now();
    const fetched = await loadBundle(base, (phase, file, loaded, total) => {
      progress({ phase, file, loaded, total, percent: total ? (100 * loaded) / total : 100 });
    }, warnings, async (small, large) => {
      stages.add('files', filesFrom);
      for (const [path, data] of small) write(path, data);
      for (const file of large) write(file.path, new Uint8Array(0));   // placeholders: bytes stay in JS
      // the fit check (py/onnxpipe/heap/fit.py) weighs each file by its size: refused here, before
      // any large file is fetched, when the bundle can't fit the WASM heap
      options.sizes = Object.fromEntries([...large.map((f) => [f.path, f.bytes]), ...[...small].map(([p, d]) => [p, d.byteLength])]);
      const needed = await entry.call('files_needed', options);
      filesFrom = now();
      return new Set(needed.files);
    });
    stages.add('files', filesFrom);
    for (const [path, data] of fetched) files.set(path, data);
    progress({ phase: 'session', file: name, loaded: 0, total: 0, percent: 100 });
    const info = await stages.time('session', () => entry.call('open_bundle', options));
    if (Object.values(info.sessions).some((s) => /webgpu/i.test(s.provider))) {
      await watchGpuDevice((reason) => hooks.fatal(reason));
    }
    return {
      ...info, bundle: name, warnings: [...warnings, ...info.warnings], boot_ms: runtime.bootMs,
      threads: runtime.threadChoice.threads, threads_reason: runtime.threadChoice.reason,
      startup: { stages: [...runtime.stages.list, ...stages.list], requested, python_snapshot: runtime.snapshot },
    };
  });
}

/** Wait for the runtime's start, reporting its steps as 'boot' progress: ``loaded`` of
 * ``total`` steps done, at once (a runtime the page booted earlier may be up already) and as
 * each step ends (all of them end before ``started`` resolves). */
async function reportBoot(progress: (event: ProgressEvent) => void, started: Promise<Runtime>, stages: Stages): Promise<void> {
  const report = (): void => {
    const done = bootStepsDone(stages);
    progress({ phase: 'boot', file: 'runtime', loaded: done, total: BOOT_STEPS.length, percent: (100 * done) / BOOT_STEPS.length });
  };
  report();
  const unwatch = stages.watch(report);
  try {
    await started;
  } finally {
    unwatch();
  }
}

/** Run ``fn`` holding the Web Lock ``name``. A frame the browser gives no storage (third-party
 * storage blocked) has no Web Locks either: then it runs unlocked (nothing is stored to guard). */
async function underLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  let ran = false;
  try {
    return await navigator.locks.request(name, () => {
      ran = true;
      return fn();
    });
  } catch (error) {
    if (ran || !(error instanceof DOMException && error.name === 'SecurityError')) throw error;
    return fn();   // BundleStore.open warns that nothing is stored
  }
}
