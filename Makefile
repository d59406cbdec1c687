# The two commands of the README:  `make book`  and  `make test`.
# Both create the virtual environment .venv on first use (Python 3.11 or newer) and are idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JB_FLAGS := -W -n --keep-going
# OFFLINE runs a command with no network at all (unshare -n): see tests/browser/offline.sh.
OFFLINE := tests/browser/offline.sh
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: env book test unit notebooks build-check browser browser-deps lab-test lab-test-full exercises pretrain execute lab bench bench-gpu clean

env: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed, found " + sys.version'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps d2l==1.0.3   # its pins break on Python 3.12: see requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .         # the course package `book`, editable
	touch $(STAMP)

## make book: set up, then build the HTML book into _build/html from the notebooks' stored outputs.
book: env
	set -o pipefail; $(BIN)/jupyter-book build . $(JB_FLAGS) 2>&1 | tee _build.log
	@echo "Open _build/html/index.html in a browser."

## make test: set up, then run every test (unit tests, every notebook under nbval, the book build,
## the built book in headless Chromium, chapter 1 and exercises A1 in JupyterLab with a live
## kernel). Notebooks, build and browser tests run with no network.
test: env browser-deps unit notebooks build-check browser lab-test

unit: env
	$(BIN)/python -m pytest tests -q --ignore=tests/browser

## Every notebook runs once per test run, here. ATEN_CPU_CAPABILITY=default makes PyTorch take
## its portable float path, not the vectorised one the stored outputs were made with: every
## checked output (# NBVAL_CHECK_OUTPUT) and every assert must hold on a machine other than the
## one that stored them (quote bounds, not digits, for trained numbers; see CONTRIBUTING.md).
notebooks: env
	ATEN_CPU_CAPABILITY=default $(OFFLINE) $(BIN)/python -m pytest --nbval-lax chapters exercises \
	  -q -p no:cacheprovider -p benchmarks.nbval_timing   # prints the chapter budget table (never fails on time)

## The test build renders the stored outputs, exactly as `make book` does (nbval above is the one
## execution of every notebook); warnings fail it, and it must build with no network.
build-check: env
	set -o pipefail; $(OFFLINE) $(BIN)/jupyter-book build . $(JB_FLAGS) 2>&1 | tee _build.log

## make browser: build the book, then test every page in headless Chromium (tests/browser);
## screenshots of every page go to _build/screenshots.
browser: env browser-deps build-check
	BOOK_HTML=_build/html $(OFFLINE) $(BIN)/python -m pytest tests/browser -q -s -p no:cacheprovider -rs --durations=3

## make lab-test: the notebooks as a learner meets them, in JupyterLab with a live kernel, driven in
## headless Chromium with no network (tests/browser/test_lab_live.py). Chapter 1: it opens unmodified
## and JupyterLab's save writes back the same bytes; the widget preview says it is static; Run All
## ends with no error and nothing on stderr; the widget is live controls; a control moved redraws
## its output. The learner copy of exercises A1: the stub's check fails with the checker's one-line
## message, the solution pasted into the stub passes ("<name>: all checks passed."); its link opens
## chapter A1, whose MyST renders. About 100 s of CPU (JupyterLab, kernels, Chromium), some 2
## minutes on a quiet 2-core machine. Screenshots: _build/lab-screenshots.
lab-test: env browser-deps
	LAB_TEST=fast $(OFFLINE) $(BIN)/python -m pytest tests/browser/test_lab_live.py -q -s -p no:cacheprovider -rs

## make lab-test-full: the same for every chapter with a widget and every learner copy (nightly: it
## runs every chapter once more, longer than the nbval stage). One or a few notebooks:
## make lab-test-full LAB_NOTEBOOKS="chapters/05_multihead_attention.ipynb exercises/05_multihead_attention.ipynb"
lab-test-full: env browser-deps
	LAB_TEST=full $(OFFLINE) $(BIN)/python -m pytest tests/browser/test_lab_live.py -q -s -p no:cacheprovider -rs

## Debian's Chromium and chromedriver (and a CJK font, for legible screenshots); skipped when installed.
browser-deps:
	@if [ -x /usr/bin/chromium ]; then echo "browser-deps: /usr/bin/chromium is installed"; else \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium chromium-driver fonts-wqy-microhei; fi

## make exercises: regenerate the learner notebooks in exercises/ from exercises/solutions/.
exercises: env
	$(BIN)/python tools/make_exercises.py

## make pretrain: chapter 8's longer pretraining run (seeded, one CPU thread, about 6 minutes),
## stored as book/checkpoints/bert_pydoc.pt with its record (command, SHA-256, accuracy) in .json.
pretrain: env
	$(BIN)/python tools/pretrain_bert.py

## make execute NB=chapters/01_attention_cues.ipynb: execute a notebook in place and store its outputs.
execute: env
	$(BIN)/python tools/execute.py $(NB)

## make lab: open the course in JupyterLab (from requirements.txt, with jupyterlab-myst so the
## notebooks' MyST renders as in the book), on chapters/; the whole repository is reachable.
## tools/jupyter/ turns the news prompt off. As root (containers) it adds --allow-root.
## LAB_FLAGS adds options, e.g. LAB_FLAGS="--no-browser --ip=0.0.0.0 --port=8888" in a container.
LAB_FLAGS ?=
lab: env
	JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/chapters \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_FLAGS)

## make bench: every notebook against its time budget (exit 1 beyond 125% of one), then our
## attention layers against PyTorch's and d2l's. BENCH_FLAGS=--no-fail prints without failing;
## LAYER_FLAGS=--quick for a shorter layer run. Results: benchmarks/results/ (not in git).
bench: env
	rc=0; $(BIN)/python -m benchmarks.notebooks $(BENCH_FLAGS) || rc=$$?; \
	$(BIN)/python -m benchmarks.layers $(LAYER_FLAGS) || rc=$$?; exit $$rc

## make bench-gpu: the same on a CUDA GPU, in one command (under 10 minutes): benchmarks/results/gpu.json.
bench-gpu: env
	$(BIN)/python -m benchmarks.gpu

clean:
	rm -rf _build _build.log
