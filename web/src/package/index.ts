// The npm package `onnxpipe`: the OpenAI-shaped engine over the in-browser runtime. Importing it
// has no side effects; createEngine() starts a worker. tools/build_package.mjs builds this entry
// with package/runtime-location.ts in place of the site's (worker and assets next to the module).
export * from '../engine/index';
export { PACKAGE_ASSET_FILES, type RuntimeAssets } from '../runtime-assets';
