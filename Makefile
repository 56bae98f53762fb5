# Every target creates and uses the local virtual environment .venv, so a fresh machine
# needs only Python 3.10+ and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# torch is pinned: this machine serves 2.13.0 (CPU build) from local disk; an open range
# would pull a multi-GB CUDA build from the registry.
TORCH  ?= torch==2.13.0
# pip compiles an installed wheel's modules to bytecode, but not an editable install's; where
# PYTHONDONTWRITEBYTECODE is set (as on this machine) Python would then compile every module
# of gradcheck from source at each start, ~0.1 s a command a user's install never pays (the
# bench caches bytecode itself: bench/run.py's child_environment).
COMPILE = $(BIN)/python -m compileall -q gradcheck

.PHONY: install install-core demo report-demo test lint format sample-runs bench clean dist \
	dist-check docs docs-serve

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Core + dev and docs tools + the frameworks the tests train with.
# The C scanner is built by pip install -e: a change to it (or to the build) rebuilds.
$(STAMP): pyproject.toml setup.py gradcheck/native/_scan.c | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev,docs,html,keras,torch]"
	$(COMPILE)
	touch $(STAMP)

install: $(STAMP)

# What a user needs to read logs and write every format (no TensorFlow, no torch): the core
# and the html extra (plotly).
install-core: | $(BIN)/python
	$(BIN)/pip install -q -e ".[html]"
	$(COMPILE)

demo: install-core
	$(BIN)/gradcheck analyze sample_runs/ --fail-on none

# The HTML and JUnit reports of the sample runs (the HTML is about 5 MB: not committed). Exit
# status 1 (findings in --fail-on: the sample runs have them on purpose) is not an error here.
report-demo: $(STAMP)
	$(BIN)/gradcheck analyze sample_runs/ --report html:sample_runs/report.html \
		--report junit:sample_runs/report.xml >/dev/null; test $$? -le 1
	@echo "open sample_runs/report.html"

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check gradcheck tests bench scripts .github docs
	$(BIN)/ruff format --check gradcheck tests bench scripts .github docs
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format gradcheck tests bench scripts .github docs
	$(BIN)/ruff check --fix gradcheck tests bench scripts .github docs

sample-runs: $(STAMP)
	$(BIN)/python scripts/make_sample_runs.py --out sample_runs

# Every series (bench/README.md); one alone, e.g.: make bench BENCH_ARGS="--series sweep"
bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# A wheel (with the compiled C engine: a failed compile is an error here) and an sdist in
# dist/, built from the venv's setuptools without a build environment of their own.
dist: | $(BIN)/python
	$(BIN)/pip install -q build "setuptools>=77" wheel
	rm -rf dist build
	GRADCHECK_REQUIRE_EXT=1 $(BIN)/python -m build --quiet --no-isolation --outdir dist .

# The wheel installed alone in a fresh venv, no compiler, analysing a copy of sample_runs/.
dist-check: dist
	$(BIN)/python scripts/check_dist.py dist

# The documentation site in site/; warnings are errors. docs-serve: the same, live.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	$(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
