#!/usr/bin/env bash
# Build the book with no network, then test it in headless Chromium and as files.
#   tests/browser/check_book.sh [OUTPUT_DIR [TOC]]
# OUTPUT_DIR: where the build goes (default: the repository, i.e. _build/html); TOC: a toc file
# to build instead of _toc.yml (the tests then visit its pages). Screenshots: OUTPUT_DIR/_build/screenshots.
# `make test` runs the same two steps (build-check, browser) on _build/.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.}
toc=${2:-}
bin=.venv/bin
set -o pipefail
tests/browser/offline.sh $bin/jupyter-book build . --path-output "$out" ${toc:+--toc "$toc"} -W -n --keep-going
start=$(date +%s)
BOOK_HTML="$out/_build/html" BOOK_TOC="$toc" tests/browser/offline.sh \
  $bin/python -m pytest tests/browser -q -s -p no:cacheprovider -rs --durations=3
echo "browser tests: $(( $(date +%s) - start )) s; screenshots in $out/_build/screenshots"
