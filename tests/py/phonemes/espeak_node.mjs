// The browser's phonemizer package run in Node, for the parity tests: the same calls as
// workers/phonemizer.ts (set_voice once per voice, then text_to_phonemes(text, 1) read as a
// C string, clauses split by " | " turned into lines).
// Protocol: one JSON request per stdin line, {"voice", "text"}; one JSON reply per stdout
// line, {"ipa"} or {"error"}. The first line out is {"ready", "load_ms"}.
import readline from 'node:readline';

const start = performance.now();
const espeak = await (await import('@echogarden/espeak-ng-emscripten')).default();
const worker = new espeak.eSpeakNGWorker();
let voice = null;
console.log(JSON.stringify({ ready: true, load_ms: performance.now() - start }));

for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let reply;
  try {
    const req = JSON.parse(line);
    if (req.voice !== voice) {
      const code = worker.set_voice(req.voice);
      if (code !== 0) throw new Error(`set_voice("${req.voice}") returned ${code}`);
      voice = req.voice;
    }
    const pointer = espeak.getPointer(worker.text_to_phonemes(req.text, 1));
    if (!pointer) throw new Error('text_to_phonemes returned no text');
    const end = espeak.HEAPU8.indexOf(0, pointer);
    const text = new TextDecoder().decode(espeak.HEAPU8.subarray(pointer, end));
    reply = { ipa: `${text.split(' | ').join('\n')}\n` };
  } catch (e) {
    reply = { error: e instanceof Error ? e.message : String(e) };
  }
  console.log(JSON.stringify(reply));
}
