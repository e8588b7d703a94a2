"""What model files become in onnxruntime-web's WASM heap: the load-time edit, the heap plan, the fit check."""
