# The two commands of the README:  `make book`  and  `make test`.
# Both create the virtual environment .venv on first use (Python 3.11 or newer) and are idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JB_FLAGS := -W -n --keep-going

.PHONY: env book test unit notebooks build-check exercises execute lab clean

env: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11 or newer is needed, found " + sys.version'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps d2l==1.0.3   # its pins break on Python 3.12: see requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .         # the course package `book`, editable
	touch $(STAMP)

## make book: set up, then build the HTML book (executing every notebook) into _build/html.
book: env
	set -o pipefail; $(BIN)/jupyter-book build . $(JB_FLAGS) 2>&1 | tee _build.log
	@echo "Open _build/html/index.html in a browser."

## make test: set up, then run every test (unit tests, every notebook under nbval, the book build).
test: env unit notebooks build-check

unit: env
	$(BIN)/python -m pytest tests -q

notebooks: env
	$(BIN)/python -m pytest --nbval-lax chapters exercises -q -p no:cacheprovider

build-check: env
	set -o pipefail; $(BIN)/jupyter-book build . $(JB_FLAGS) 2>&1 | tee _build.log

## make exercises: regenerate the learner notebooks in exercises/ from exercises/solutions/.
exercises: env
	$(BIN)/python tools/make_exercises.py

## make execute NB=chapters/01_attention_cues.ipynb: execute a notebook in place and store its outputs.
execute: env
	$(BIN)/python tools/execute.py $(NB)

## make lab: open the chapters in JupyterLab (installed into .venv on first use).
lab: env
	$(BIN)/python -c "import jupyterlab" 2>/dev/null || $(BIN)/python -m pip install --quiet "jupyterlab>=4,<5"
	$(BIN)/jupyter lab chapters/

clean:
	rm -rf _build _build.log
