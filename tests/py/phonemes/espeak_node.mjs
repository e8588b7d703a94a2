// The browser's phonemizer package run in Node, for the parity tests: the same calls as
// workers/phonemizer.ts (set_voice once per voice, then synthesize_ipa(text).ipa).
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
    const result = worker.synthesize_ipa(req.text);
    if (result.code !== 0) throw new Error(`synthesize_ipa returned code ${result.code}`);
    reply = { ipa: result.ipa };
  } catch (e) {
    reply = { error: e instanceof Error ? e.message : String(e) };
  }
  console.log(JSON.stringify(reply));
}
