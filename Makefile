# fedbench: the quick-start commands are `make setup`, `make quick` and `make test`; all are idempotent.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export MPLCONFIGDIR ?= $(CURDIR)/.cache/matplotlib
export XDG_CACHE_HOME ?= $(CURDIR)/.cache
# Put the venv first on PATH so Snakemake `shell:` rules and `python` resolve to it.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: browser setup data quick test bench lint lint-only format clean cluster-test

setup: $(VENV)/.installed

# The bare package first, and every module imported with its declared dependencies alone (an
# undeclared import fails here, on a fresh venv as in CI); then the extras.
$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python .ci/import_all.py
	$(BIN)/python -m pip install --quiet -e '.[test,offline,cluster]'
	touch $@

# Real offline data on Debian: the Fashion-MNIST package (skipped quietly where apt is unavailable).
data:
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1)) || \
		echo "note: dataset-fashion-mnist not installed; the quick grid falls back to the MNIST 5k subset"; \
	fi

quick: setup data
	$(BIN)/snakemake --cores $(CORES) $(SUBSAMPLE) quick

# Each stage prints its wall time (.ci/stage); `.ci/stage --summary` tabulates them. Each paper's
# smoke grid is a stage of its own: its budget is 5 minutes on a 2-core machine (README).
STAGE := .ci/stage
# --scheduler-subsample: Snakemake stats the inputs of every ready job on each scheduling pass;
# with ~300 sub-second smoke jobs ready that took a third of a core (95 s of SuPerFed's smoke grid).
SUBSAMPLE := --scheduler-subsample 16
smoke = $(BIN)/snakemake --cores $(CORES) $(SUBSAMPLE) $(1) --config scale=smoke --quiet rules

# Headless Chromium for the landing page's rendering test (Debian's package, as root with apt;
# elsewhere that test is skipped with a note).
browser:
	@if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1)) || \
		echo "note: chromium not installed; the landing page's rendering test is skipped"; \
	fi

test: setup browser
	$(STAGE) pytest $(BIN)/python -m pytest -q tests
	$(STAGE) benchmarks-once $(BIN)/python -m pytest -q benchmarks -p no:cacheprovider --benchmark-disable
	$(STAGE) dry-run-paper $(BIN)/snakemake -n --cores $(CORES) all claims --config scale=paper --quiet rules
	$(STAGE) data-status $(BIN)/python -m fedbench.data status --scale quick
	$(STAGE) smoke-quick $(call smoke,quick)
	$(STAGE) smoke-superfed $(call smoke,superfed superfed_quick)
	$(STAGE) smoke-pfedbred $(call smoke,pfedbred pfedbred_quick)
	$(STAGE) smoke-aaggff $(call smoke,aaggff aaggff_quick)
	$(STAGE) smoke-fedevg $(call smoke,fedevg fedevg_quick)
	$(STAGE) smoke-dqnfed $(call smoke,dqnfed dqnfed_quick)
	$(STAGE) smoke-qffl $(call smoke,qffl qffl_quick)
	$(STAGE) smoke-claims $(call smoke,claims index)
	$(STAGE) built-outputs env FEDBENCH_BUILT=results/smoke $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_built_csv.py
	$(STAGE) lint $(MAKE) --no-print-directory lint-only

lint-only:
	$(BIN)/ruff check fedbench tests workflow benchmarks .ci
	$(BIN)/ruff format --check fedbench tests workflow benchmarks .ci
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/snakemake --lint --cores 1

# Benchmarks (pytest-benchmark JSON under results/benchmarks/), then the summary table and
# results/benchmarks/summary.json (speed-ups, GFLOP/s against this run's matmul rate, memory).
bench: setup
	mkdir -p results/benchmarks
	$(BIN)/python -m pytest -q benchmarks -p no:cacheprovider --benchmark-enable \
		--benchmark-json=results/benchmarks/latest.json --benchmark-columns=min,median,rounds \
		--benchmark-sort=name
	$(BIN)/python benchmarks/summary.py results/benchmarks/latest.json

lint: setup lint-only

format: setup
	$(BIN)/ruff format fedbench tests workflow benchmarks .ci
	$(BIN)/snakefmt Snakefile workflow/rules

clean:
	rm -rf results/smoke .snakemake/incomplete

# A real one-node SLURM cluster on localhost (root, Debian): installs slurm-wlm, slurmdbd, munge and
# mariadb-server, runs the quick smoke grid through profiles/slurm, stops every daemon (issue 42).
cluster-test: setup
	bash tests/cluster/slurm_cluster.sh
