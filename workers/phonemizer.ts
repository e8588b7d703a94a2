// The browser's phonemizer: eSpeak-NG compiled to JavaScript (@echogarden/espeak-ng-emscripten,
// GPL-3.0), from the URLs the page gave (the site serves it at /espeak-ng/: vite.config.ts,
// tools/serve.py; the npm package carries it in assets/espeak-ng/). Python
// reaches it as onnxpipe_js.phonemize (py/onnxpipe/phonemes/web.py); the result is espeak's
// IPA text (clauses on lines, phonemes joined by "_"), which Python cleans exactly as it
// cleans native espeak-ng output.

import { assets } from './assets';

/** What we use of the package (it ships no types). */
interface EspeakWorker {
  set_voice(name: string): number;
  text_to_phonemes(text: string, mode: number): object; // a pointer to a C string
}
interface EspeakModule {
  eSpeakNGWorker: new () => EspeakWorker;
  getPointer(pointer: object): number;
  HEAPU8: Uint8Array;
}
interface Espeak {
  module: EspeakModule;
  worker: EspeakWorker;
}
type EspeakFactory = (moduleArg?: Record<string, unknown>) => Promise<EspeakModule>;

let loading: Promise<Espeak> | null = null;
const utf8 = new TextDecoder();
let currentVoice: string | null = null;

function reason(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The .data file, fetched here rather than by the module: its own loader never settles when
 * the fetch fails, and a plain GET is what the service worker can answer offline. */
async function fetchData(url: string): Promise<ArrayBuffer> {
  let response: Response;
  try {
    response = await fetch(url);
  } catch (e) {
    throw new Error(`phonemizer: cannot fetch ${url} (${reason(e)})`);
  }
  if (!response.ok) throw new Error(`phonemizer: ${url} answered HTTP ${response.status}; espeak-ng.js and espeak-ng.data must be served where the runtime's assets say`);
  return response.arrayBuffer();
}

async function importFactory(url: string): Promise<EspeakFactory> {
  try {
    return ((await import(/* @vite-ignore */ url)) as { default: EspeakFactory }).default;
  } catch (e) {
    throw new Error(`phonemizer: cannot import ${url} (${reason(e)})`);
  }
}

async function load(): Promise<Espeak> {
  const { espeak_ng: url, espeak_ng_data: dataUrl } = assets();
  const [data, factory] = await Promise.all([fetchData(dataUrl), importFactory(url)]);
  try {
    // the file packager takes the bytes from this hook instead of fetching them itself
    const module = await factory({ getPreloadedPackage: () => data });
    return { module, worker: new module.eSpeakNGWorker() };
  } catch (e) {
    throw new Error(`phonemizer: espeak-ng from ${url} failed to start (${reason(e)})`);
  }
}

/** The package's IPA for `text`: clauses on separate lines, phonemes joined by "_". */
export async function phonemize(voice: string, text: string): Promise<string> {
  loading ??= load();
  let espeak: Espeak;
  try {
    espeak = await loading;
  } catch (e) {
    loading = null; // let a later call try again
    throw e;
  }
  if (voice !== currentVoice) {
    const code = espeak.worker.set_voice(voice);
    if (code !== 0) throw new Error(`phonemizer: espeak-ng has no voice "${voice}" (set_voice returned ${code}); check preprocessing.phonemes.voice`);
    currentVoice = voice;
  }
  // text_to_phonemes gives what synthesize_ipa() prints (clauses split by " | " instead of
  // lines) without synthesizing the audio: ~3 ms a clause instead of ~10-40 ms
  const pointer = espeak.module.getPointer(espeak.worker.text_to_phonemes(text, 1));
  if (!pointer) throw new Error(`phonemizer: espeak-ng could not phonemize ${JSON.stringify(text.slice(0, 60))}`);
  const heap = espeak.module.HEAPU8;
  const end = heap.indexOf(0, pointer);
  return `${utf8.decode(heap.subarray(pointer, end)).split(' | ').join('\n')}\n`;
}
