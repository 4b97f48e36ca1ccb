# Every target sets itself up on a fresh machine (Python 3.11 + Java 17 + Node 20 with npm): it creates
# .venv and installs, and Azurite (the Azure Storage emulator the tests start) into .emulators/.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EMULATORS := .emulators
AZURITE_VERSION := 3.37.0
AZURITE := $(EMULATORS)/node_modules/.bin/azurite-blob

.PHONY: venv test demo bench clean

# pip -qq: errors only (an index configured on the machine but missing a package is a warning per
# package). The editable install puts the checkout on sys.path (see package-dir in pyproject.toml),
# where Spark's data source lookup finds pyspark_lakelog.py, as any `pip install -e .` does.
$(STAMP): pyproject.toml
	@echo "make: installing lakelog and its test and Spark dependencies into $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip
	@$(BIN)/python -m pip install -qq -e '.[dev,spark,s3,azure,gcs,glue,iceberg-catalogs]'
	@test -x $(AZURITE) || npm install --prefix $(EMULATORS) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)
	@touch $(STAMP)

venv: $(STAMP)

# Two workers (the machines have two cores); the tests that use Spark share one worker and its one session.
XDIST ?= -n 2 --dist loadgroup
test: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider $(XDIST) $(PYTEST_ARGS)

demo: venv
	@$(BIN)/python -m spark_ext.demo

# The whole benchmark suite (Spark included); writes benchmarks/results/latest.json.
bench: venv
	$(BIN)/python -m benchmarks --spark $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(EMULATORS) demo_output .pytest_cache .hypothesis
