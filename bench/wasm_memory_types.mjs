#!/usr/bin/env node
// The linear memory each onnxruntime-web WASM build declares: whether it is 64-bit (memory64)
// and its most pages (64 KiB each; 65536 = the 4 GiB of wasm32). Read from the .wasm binaries'
// import and memory sections, so it holds for any version installed. Not a test.
//
//   node bench/wasm_memory_types.mjs [FILE.wasm ...]     (default: node_modules/onnxruntime-web/dist/*.wasm)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'node_modules', 'onnxruntime-web', 'dist');

/** The memories a module imports or defines: {where, memory64, shared, min_pages, max_pages}. */
export function memories(bytes) {
  let p = 8;
  const leb = () => {
    let r = 0, s = 0, x;
    do { x = bytes[p++]; r += (x & 0x7f) * 2 ** s; s += 7; } while (x & 0x80);
    return r;
  };
  const name = () => { const n = leb(); const t = Buffer.from(bytes.subarray(p, p + n)).toString(); p += n; return t; };
  const limits = (where) => {
    const flags = bytes[p++];
    const min = leb();
    return { where, memory64: Boolean(flags & 4), shared: Boolean(flags & 2), min_pages: min, max_pages: flags & 1 ? leb() : null };
  };
  const out = [];
  while (p < bytes.length) {
    const id = bytes[p++];
    const size = leb();
    const end = p + size;
    if (id === 2) {   // imports: module, field, kind (0 func, 1 table, 2 memory, 3 global, 4 tag)
      for (let i = 0, n = leb(); i < n; i++) {
        const where = `import ${name()}.${name()}`;
        const kind = bytes[p++];
        if (kind === 0) leb();
        else if (kind === 1) { p++; const flags = bytes[p++]; leb(); if (flags & 1) leb(); }
        else if (kind === 2) out.push(limits(where));
        else if (kind === 3) p += 2;
        else if (kind === 4) { p++; leb(); }
      }
    } else if (id === 5) {
      for (let i = 0, n = leb(); i < n; i++) out.push(limits('memory section'));
    }
    p = end;
  }
  return out;
}

const files = process.argv.slice(2).length ? process.argv.slice(2)
  : fs.readdirSync(DIST).filter((f) => f.endsWith('.wasm')).map((f) => path.join(DIST, f));
const version = JSON.parse(fs.readFileSync(path.join(DIST, '..', 'package.json'), 'utf8')).version;
console.log(`onnxruntime-web ${version}:`);
for (const f of files) {
  for (const m of memories(fs.readFileSync(f))) {
    const gib = m.max_pages == null ? 'no maximum' : `${(m.max_pages * 65536) / 2 ** 30} GiB at most`;
    console.log(`  ${path.basename(f)}: ${m.memory64 ? '64-bit' : '32-bit'} ${m.shared ? 'shared ' : ''}memory (${m.where}), ${gib}`);
  }
}
