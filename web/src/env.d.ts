/// <reference types="vite/client" />
/// <reference types="vite-plugin-pwa/vanillajs" />

/** The build id shown in the page footer (tools/pwa.ts: ONNXPIPE_BUILD_ID, else commit + time). */
declare const __ONNXPIPE_BUILD_ID__: string;
