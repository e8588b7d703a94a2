// Build the npm package `onnxpipe` (issue 25; docs/library.md) into build/package/onnxpipe/ and
// pack it as build/package/onnxpipe-X.Y.Z.tgz. Run by `make package` after the wheel and its
// lockfile are built (tools/build_pyodide_lock.py).
//
// Layout: dist/index.js (the engine, one ES module, no side effects on import), dist/types/
// (declarations), dist/runtime.worker.js (the worker, one file with no imports of its own), and
// dist/assets/ (onnxruntime-web, Pyodide, the wheel, espeak-ng: web/src/runtime-assets.ts
// PACKAGE_ASSET_FILES). index.js names each of those files with a literal
// `new URL('./…', import.meta.url)` (web/src/package/runtime-location.ts), which bundlers copy
// and rewrite and which a page with no bundler resolves beside the module. Rolldown bundles our
// code without touching those URLs (Vite would rewrite them for our own build instead).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT_ROOT = path.join(ROOT, 'build', 'package');
const OUT = path.join(OUT_ROOT, 'onnxpipe');
const DIST = path.join(OUT, 'dist');
const SITE_LOCATION = path.join(ROOT, 'web', 'src', 'runtime-location.ts');
const PACKAGE_LOCATION = path.join(ROOT, 'web', 'src', 'package', 'runtime-location.ts');
const NODE_MODULES = path.join(ROOT, 'node_modules');
const PYODIDE_BUILD = path.join(ROOT, 'build', 'pyodide');

const fail = (message) => {
  console.error(`build_package: ${message}`);
  process.exit(1);
};

/** The site's runtime-location.ts is swapped for the package's (worker and assets beside index.js). */
const packageLocation = {
  name: 'onnxpipe-package-location',
  async resolveId(source, importer, options) {
    const resolved = await this.resolve(source, importer, { ...options, skipSelf: true });
    return resolved?.id === SITE_LOCATION ? PACKAGE_LOCATION : null;
  },
};

/** Node built-ins that browser packages reach only on their Node branch (web-xgrammar's
 * Emscripten loader: `await import('module')`, `require('url')`) become empty modules, as Vite's
 * browser build makes them; left external they would stay imports in the one-file worker. */
const NODE_ONLY = new Set(['module', 'url', 'fs', 'path', 'crypto', 'worker_threads']);
const nodeBuiltinStubs = {
  name: 'onnxpipe-node-builtin-stubs',
  resolveId(source, importer) {
    const name = source.replace(/^node:/, '');
    if (NODE_ONLY.has(name) && importer && importer.includes(`${path.sep}node_modules${path.sep}`)) return `\0node-stub:${name}`;
    return null;
  },
  load(id) {
    if (!id.startsWith('\0node-stub:')) return null;
    // every name a Node branch might read is undefined: calling one throws, as in a browser
    return 'export default {}; export const createRequire = undefined; export const fileURLToPath = undefined;';
  },
};

async function bundle(input, file, { plugins = [], minify = true } = {}) {
  plugins = [nodeBuiltinStubs, ...plugins];
  const build = await rolldown({ input, platform: 'browser', plugins, logLevel: 'warn' });
  await build.write({ file, format: 'es', codeSplitting: false, minify });
  await build.close();
  const code = fs.readFileSync(file, 'utf8');
  if (code.includes('import.meta.env')) fail(`${path.relative(ROOT, file)} still reads import.meta.env (Vite-only)`);
  return code;
}

function copy(from, to) {
  if (!fs.existsSync(from)) fail(`${path.relative(ROOT, from)} is missing (run make web-deps web)`);
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}

/** The asset files (PACKAGE_ASSET_FILES' layout) from node_modules and build/pyodide. */
function copyAssets() {
  const assets = path.join(DIST, 'assets');
  const ort = path.join(NODE_MODULES, 'onnxruntime-web', 'dist');
  for (const name of ['ort.wasm.bundle.min.mjs', 'ort-wasm-simd-threaded.wasm', 'ort.webgpu.bundle.min.mjs', 'ort-wasm-simd-threaded.asyncify.wasm']) {
    copy(path.join(ort, name), path.join(assets, 'ort', name));
  }
  const pyodide = path.join(NODE_MODULES, 'pyodide');
  for (const name of ['pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip']) copy(path.join(pyodide, name), path.join(assets, 'pyodide', name));
  // our lockfile, its onnxpipe entry naming the wheel by the package's fixed file name
  const lock = JSON.parse(fs.readFileSync(path.join(PYODIDE_BUILD, 'pyodide-lock.json'), 'utf8'));
  const wheel = lock.packages?.onnxpipe;
  if (!wheel?.file_name) fail('build/pyodide/pyodide-lock.json lists no onnxpipe wheel (run tools/build_pyodide_lock.py)');
  copy(path.join(PYODIDE_BUILD, wheel.file_name), path.join(assets, 'pyodide', 'onnxpipe-py3-none-any.whl'));
  wheel.file_name = 'onnxpipe-py3-none-any.whl';
  fs.writeFileSync(path.join(assets, 'pyodide', 'pyodide-lock.json'), JSON.stringify(lock));
  const espeak = path.join(NODE_MODULES, '@echogarden', 'espeak-ng-emscripten');
  for (const name of ['espeak-ng.js', 'espeak-ng.data', 'COPYING']) copy(path.join(espeak, name), path.join(assets, 'espeak-ng', name));
}

/** Every `new URL('./…', import.meta.url)` in index.js must name a file the package has. */
function checkUrls(code) {
  const urls = [...code.matchAll(/new URL\(\s*["'`]([^"'`]+)["'`]\s*,\s*import\.meta\.url\s*\)/g)].map((m) => m[1]);
  if (urls.length < 2) fail(`index.js names ${urls.length} files by new URL(…, import.meta.url); expected the worker and the assets`);
  for (const url of urls) {
    if (!fs.existsSync(path.join(DIST, url))) fail(`index.js refers to ${url}, which the package lacks`);
  }
  return urls;
}

function declarations() {
  const config = path.join(OUT_ROOT, 'tsconfig.package.json');
  fs.writeFileSync(config, JSON.stringify({
    extends: path.join(ROOT, 'tsconfig.json'),
    compilerOptions: {
      noEmit: false, declaration: true, emitDeclarationOnly: true, rootDir: path.join(ROOT, 'web', 'src'),
      outDir: path.join(DIST, 'types'), noUnusedLocals: false, noUnusedParameters: false,
    },
    include: [path.join(ROOT, 'web', 'src', 'package', 'index.ts'), path.join(ROOT, 'web', 'src', 'env.d.ts')],
  }, null, 2));
  execFileSync(path.join(NODE_MODULES, '.bin', 'tsc'), ['-p', config], { cwd: ROOT, stdio: 'inherit' });
  const entry = path.join(DIST, 'types', 'package', 'index.d.ts');
  if (!fs.existsSync(entry)) fail(`tsc wrote no ${path.relative(ROOT, entry)}`);
}

function manifest() {
  const site = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const openai = site.devDependencies.openai;
  const pkg = {
    name: 'onnxpipe',
    version: site.version,
    description: 'Generative AI pipelines (ONNX models + one pipeline.json) in the browser, behind an OpenAI-shaped engine',
    type: 'module',
    license: 'UNLICENSED',
    sideEffects: false,
    main: './dist/index.js',
    module: './dist/index.js',
    types: './dist/types/package/index.d.ts',
    exports: {
      '.': { types: './dist/types/package/index.d.ts', import: './dist/index.js', default: './dist/index.js' },
      './assets/*': './dist/assets/*',
      './package.json': './package.json',
    },
    files: ['dist', 'README.md'],
    // the engine's request and response types are the official client's (type-only imports)
    dependencies: { openai },
    keywords: ['onnx', 'onnxruntime-web', 'pyodide', 'llm', 'tts', 'speech-to-text', 'openai', 'webgpu', 'wasm'],
  };
  fs.writeFileSync(path.join(OUT, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.copyFileSync(path.join(ROOT, 'docs', 'library.md'), path.join(OUT, 'README.md'));
  return pkg;
}

async function main() {
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(DIST, { recursive: true });
  copyAssets();
  const index = await bundle(path.join(ROOT, 'web', 'src', 'package', 'index.ts'), path.join(DIST, 'index.js'), { plugins: [packageLocation], minify: false });
  const worker = await bundle(path.join(ROOT, 'workers', 'runtime.worker.ts'), path.join(DIST, 'runtime.worker.js'));
  if (/\bimport\s*\(\s*["'`]/.test(worker) || /^import\s/m.test(worker)) fail('runtime.worker.js imports a module of its own; it must be one file');
  const urls = checkUrls(index);
  declarations();
  const pkg = manifest();
  for (const old of fs.readdirSync(OUT_ROOT).filter((name) => name.endsWith('.tgz'))) fs.rmSync(path.join(OUT_ROOT, old));
  const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', OUT_ROOT], { cwd: OUT, encoding: 'utf8' });
  const [{ filename, size, unpackedSize, entryCount }] = JSON.parse(packed);
  const mb = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  console.log(`build/package/${filename}: ${pkg.name}@${pkg.version}, ${entryCount} files, ${mb(size)} packed, ${mb(unpackedSize)} unpacked; index.js names ${urls.length} files`);
}

await main();
