// A web developer's app that installs the packed npm package (build/package/onnxpipe-X.Y.Z.tgz,
// `make package`) outside this repo: what `npm create vite` writes plus
// tests/e2e/fixtures/package-consumer, `npm install` of the tarball and the official `openai`
// client, then `tsc` (src/typed.ts against the package's declarations) and `vite build` with no config. Used by tests/e2e/package.test.mjs and
// bench/package_speed.mjs.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './browser.mjs';

const PACKAGE_DIR = path.join(ROOT, 'build', 'package');
const SITE = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
export const FIXTURES = path.join(ROOT, 'tests', 'e2e', 'fixtures');

/** The packed tarball, or null (not built). */
export function packageTarball() {
  if (!fs.existsSync(PACKAGE_DIR)) return null;
  const name = fs.readdirSync(PACKAGE_DIR).find((n) => /^onnxpipe-\d+\.\d+\.\d+\.tgz$/.test(n));
  return name ? path.join(PACKAGE_DIR, name) : null;
}

/** npm in ``cwd``, from npm's cache where it has the files (installing this repo filled it). */
function npm(args, cwd) {
  execFileSync('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd, stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 });
}

/** Make, install and build the app ``fixture`` (a folder of tests/e2e/fixtures) in ``dir``
 * (created); returns ``dir``; its build is dir/dist. */
export function buildConsumerApp(dir, fixture = 'package-consumer') {
  const tarball = packageTarball();
  if (!tarball) throw new Error('no build/package/onnxpipe-X.Y.Z.tgz: run make package');
  fs.cpSync(path.join(FIXTURES, fixture), dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({
    name: 'consumer', private: true, version: '0.0.0', type: 'module',
    scripts: { dev: 'vite', build: 'tsc && vite build', preview: 'vite preview' },
    devDependencies: { vite: SITE.devDependencies.vite, typescript: SITE.devDependencies.typescript },
  }, null, 2));
  npm(['install'], dir);
  npm(['install', tarball, `openai@${SITE.devDependencies.openai}`], dir);
  // `npm run build` of Vite's TypeScript template: tsc checks src/typed.ts against the package's types
  const bin = (name) => path.join(dir, 'node_modules', '.bin', name);
  if (fs.existsSync(path.join(dir, 'tsconfig.json'))) execFileSync(bin('tsc'), ['-p', '.'], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
  execFileSync(bin('vite'), ['build', '--logLevel', 'warn'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 });
  return dir;
}
