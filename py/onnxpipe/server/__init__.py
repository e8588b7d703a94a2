"""``onnxpipe serve``: an OpenAI-compatible HTTP server over loaded bundles (docs/server.md).

CPython only (FastAPI + uvicorn); the browser has its own OpenAI-shaped engine (web/src/engine/).
"""
