// Every e2e time limit in one place (milliseconds). Scale them all with ONNXPIPE_E2E_SLOW=3.
const SLOW = Number(process.env.ONNXPIPE_E2E_SLOW || 1);
const ms = (n) => Math.round(n * SLOW);

export const TIMEOUTS = {
  /** A whole test file (node:test `timeout` on the suite). */
  file: ms(180_000),
  /** Chat page up and its RuntimeClient exposed on window.__onnxpipe. */
  page: ms(30_000),
  /** Boot Pyodide + fetch, verify and open a bundle. */
  load: ms(120_000),
  /** One generation (the 135M model at a few tokens/s through Pyodide). */
  generate: ms(120_000),
  /** One native `python -m onnxpipe run`. */
  native: ms(120_000),
};
