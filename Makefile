# The two entry points of the README: `make fuzz` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
BUDGET ?= 120s

.PHONY: fuzz test quick lint typecheck unit bench clean

# pip's own output (its warnings about this machine's index settings included) goes to
# $(VENV)/install.log; a failure shows the log's tail and stops.
$(BIN)/fuzzbot: requirements.txt pyproject.toml
	@echo "installing fuzzbot into $(VENV) (pip's output: $(VENV)/install.log)"
	$(PYTHON) -m venv $(VENV)
	@{ $(BIN)/pip install --upgrade pip && $(BIN)/pip install -r requirements.txt && \
	  $(BIN)/pip install --no-deps -e . ; } > $(VENV)/install.log 2>&1 || \
	  { tail -n 25 $(VENV)/install.log; echo "error: installing into $(VENV) failed (log: $(VENV)/install.log)"; exit 1; }
	touch $@

# A regression campaign between two onnxruntime releases (examples/ort-regression.yml).
# Exit 2 means new regressions were found: a result, not a failure of `make`. Each run
# replaces the last one's results in fuzzbot-out/ (--force); keep a copy to compare.
fuzz: $(BIN)/fuzzbot
	$(BIN)/fuzzbot fuzz --config examples/ort-regression.yml --budget $(BUDGET) --out fuzzbot-out --force; \
	status=$$?; [ $$status -eq 0 ] || [ $$status -eq 2 ]

test: $(BIN)/fuzzbot lint typecheck unit

WORKFLOWS := .github/workflows/*.yml examples/workflows/*.yml

# The Action too: workflows (actionlint; shellcheck and pyflakes off, so every machine
# sees the same), workflows and action.yml against the schemas vendored in
# check-jsonschema (no download), and the Dockerfile (hadolint).
lint: $(BIN)/fuzzbot
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/actionlint -shellcheck= -pyflakes= $(WORKFLOWS)
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	$(BIN)/check-jsonschema --builtin-schema vendor.github-actions action.yml composite/action.yml
	$(BIN)/hadolint Dockerfile

typecheck: $(BIN)/fuzzbot
	$(BIN)/mypy

# Every core, one test module per worker: module fixtures (a campaign, a build) are made
# once, and the session's histories and builds are shared under their locks.
unit: $(BIN)/fuzzbot
	$(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=30

# The tier a change is checked with first: no release venv, no git-history build, no whole
# campaign (pyproject.toml's markers). `make test` runs every tier.
quick: $(BIN)/fuzzbot
	$(BIN)/pytest -q -n auto --dist loadfile --no-loadscope-reorder -m "not release and not campaign"

bench: $(BIN)/fuzzbot
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/worker.py
	$(BIN)/python bench/generate.py
	$(BIN)/python bench/values.py

clean:
	rm -rf $(VENV) fuzzbot-out fuzzbot-gen .mypy_cache .pytest_cache .ruff_cache
