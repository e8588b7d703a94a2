#!/usr/bin/env node
// Write the espeak-ng-data bundled in @echogarden/espeak-ng-emscripten (the browser's
// phonemizer) to OUTDIR/espeak-ng-data, so native `espeak-ng --path=OUTDIR` phonemizes with
// the same data as the browser (notes/2026-11-21-tts-findings.md §3.3).
//
//   node tools/extract_espeak_data.mjs OUTDIR
//
// The files are read from the package's own Emscripten virtual FS (its file-packager .data),
// so nothing here depends on the packager's layout. A stamp makes a second run a no-op; the
// folder appears atomically (written aside, then renamed), so concurrent runs are safe.
// The data is GPL-3.0, like the package: keep the output out of git.
import fs from 'node:fs';
import path from 'node:path';

const PACKAGE = '@echogarden/espeak-ng-emscripten';
const STAMP = '.onnxpipe-extracted.json';
const SKIP_ROOT = new Set(['dev', 'proc', 'tmp', 'home']);

function fail(message) {
  console.error(`extract_espeak_data: ${message}`);
  process.exit(1);
}

function packageInfo() {
  let pkgJson;
  try {
    pkgJson = new URL(import.meta.resolve(`${PACKAGE}/package.json`));
  } catch {
    // the package's "exports" may hide package.json; find it next to the main module
    try {
      pkgJson = new URL('package.json', import.meta.resolve(PACKAGE));
    } catch {
      fail(`${PACKAGE} is not installed (run \`npm install\` in the repository root)`);
    }
  }
  const dir = path.dirname(pkgJson.pathname);
  const version = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  const dataSize = fs.statSync(path.join(dir, 'espeak-ng.data')).size;
  return { package: PACKAGE, version, data_bytes: dataSize };
}

/** The virtual FS directory named espeak-ng-data (the package puts it under /usr/share). */
function findDataDir(FS) {
  const walk = (dir, depth) => {
    for (const name of FS.readdir(dir)) {
      if (name === '.' || name === '..' || (dir === '/' && SKIP_ROOT.has(name))) continue;
      const p = dir === '/' ? `/${name}` : `${dir}/${name}`;
      if (!FS.isDir(FS.stat(p).mode)) continue;
      if (name === 'espeak-ng-data') return p;
      if (depth < 4) {
        const found = walk(p, depth + 1);
        if (found) return found;
      }
    }
    return null;
  };
  return walk('/', 0);
}

function copyTree(FS, src, dst) {
  let files = 0;
  let bytes = 0;
  fs.mkdirSync(dst, { recursive: true });
  for (const name of FS.readdir(src)) {
    if (name === '.' || name === '..') continue;
    const from = `${src}/${name}`;
    const to = path.join(dst, name);
    if (FS.isDir(FS.stat(from).mode)) {
      const sub = copyTree(FS, from, to);
      files += sub.files;
      bytes += sub.bytes;
    } else {
      const data = FS.readFile(from);
      fs.writeFileSync(to, data);
      files += 1;
      bytes += data.length;
    }
  }
  return { files, bytes };
}

async function main() {
  const outDir = process.argv[2];
  if (!outDir || process.argv.length > 3) fail('usage: node tools/extract_espeak_data.mjs OUTDIR');
  const target = path.resolve(outDir, 'espeak-ng-data');
  const info = packageInfo();
  const stampPath = path.join(target, STAMP);
  if (fs.existsSync(stampPath)) {
    try {
      const old = JSON.parse(fs.readFileSync(stampPath, 'utf8'));
      if (old.version === info.version && old.data_bytes === info.data_bytes) {
        console.log(`${target} is up to date (${PACKAGE} ${info.version})`);
        return;
      }
    } catch {
      // unreadable stamp: extract again
    }
  }
  const start = performance.now();
  let FS;
  try {
    const mod = await import(PACKAGE);
    FS = (await mod.default()).FS;
  } catch (e) {
    fail(`cannot load ${PACKAGE}: ${e instanceof Error ? e.message : e}`);
  }
  const src = findDataDir(FS);
  if (!src) fail(`${PACKAGE} ${info.version} has no espeak-ng-data folder in its virtual file system`);
  const tmp = path.resolve(outDir, `.espeak-ng-data.tmp-${process.pid}`);
  fs.rmSync(tmp, { recursive: true, force: true });
  const { files, bytes } = copyTree(FS, src, tmp);
  if (!fs.existsSync(path.join(tmp, 'phontab'))) fail(`${src} in ${PACKAGE} has no phontab; not espeak-ng data`);
  fs.writeFileSync(path.join(tmp, STAMP), JSON.stringify({ ...info, files, bytes }, null, 2) + '\n');
  fs.rmSync(target, { recursive: true, force: true });
  try {
    fs.renameSync(tmp, target);
  } catch (e) {
    // a concurrent run got there first: keep its (identical) copy
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!fs.existsSync(stampPath)) throw e;
  }
  const ms = Math.round(performance.now() - start);
  console.log(`wrote ${target}: ${files} files, ${bytes} bytes from ${PACKAGE} ${info.version} in ${ms} ms`);
}

await main();
