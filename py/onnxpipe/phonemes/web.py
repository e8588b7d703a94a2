"""The browser phonemizer: @echogarden/espeak-ng-emscripten, reached through the worker's
``onnxpipe_js.phonemize(voice, text)`` (workers/phonemizer.ts). It returns the package's raw
``synthesize_ipa(text).ipa``; rules.clean() turns that into the native engine's form.

Pyodide is imported inside the call, so importing this module natively costs nothing.
"""

from __future__ import annotations

from ..errors import EngineError


class WebEspeak:
    """One JS call per chunk, awaited synchronously (pyodide.ffi.run_sync)."""

    def check(self, voice: str) -> None:
        # nothing to do: the package loads on the first sentence, inside the speak call whose
        # stack run_sync can suspend (the load call may not allow it)
        return None

    def phonemize(self, voice: str, chunks: list[str]) -> list[str]:
        import onnxpipe_js  # type: ignore[import-not-found]  (workers/bridge.ts, Pyodide only)
        from pyodide.ffi import JsException, run_sync  # type: ignore[import-not-found]

        out = []
        for chunk in chunks:
            try:
                out.append(str(run_sync(onnxpipe_js.phonemize(voice, chunk))))
            except JsException as exc:
                raise EngineError(f"browser phonemizer (espeak-ng, voice {voice}): {exc}") from None
        return out
