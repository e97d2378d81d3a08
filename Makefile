# Every target bootstraps its own virtual environment, so a fresh clone needs only python3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-crewai test-adk-strands bench lint clean

$(STAMP): pyproject.toml constraints/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -c constraints/dev.txt
	touch $(STAMP)

# CrewAI's tests in an environment of their own: crewai pins mcp<2, the rest of the suite needs mcp 2.
# About 1 GB and two minutes to build the first time (chromadb, lancedb, onnxruntime come with it).
CREWAI_VENV  := .venv-crewai
CREWAI_STAMP := $(CREWAI_VENV)/.installed

$(CREWAI_STAMP): pyproject.toml
	$(PYTHON) -m venv $(CREWAI_VENV)
	$(CREWAI_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CREWAI_VENV)/bin/python -m pip install --quiet -e '.[crewai]' 'pytest>=8' 'pytest-asyncio>=0.23' 'hypothesis>=6'
	touch $(CREWAI_STAMP)

test-crewai: $(CREWAI_STAMP)
	OUTCOME_TELEMETRY_CREWAI=1 $(CREWAI_VENV)/bin/python -m pytest -p no:cacheprovider tests/crewai_integration $(PYTEST_ARGS)

# Google ADK's and Strands Agents' tests in one environment of their own: ADK pins
# opentelemetry-sdk<=1.44 and Strands mcp<2.2, older than the rest of the suite needs; the two fit
# together. About 350 MB, under a minute to build. numpy: DuckDB's Python functions, which
# forensics registers, need it, and the [forensics] extra does not bring it.
ADK_STRANDS_VENV  := .venv-adk-strands
ADK_STRANDS_STAMP := $(ADK_STRANDS_VENV)/.installed

$(ADK_STRANDS_STAMP): pyproject.toml
	$(PYTHON) -m venv $(ADK_STRANDS_VENV)
	$(ADK_STRANDS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ADK_STRANDS_VENV)/bin/python -m pip install --quiet -e '.[google-adk,strands-agents,forensics]' 'pytest>=8' 'pytest-asyncio>=0.23' 'hypothesis>=6'
	touch $(ADK_STRANDS_STAMP)

test-adk-strands: $(ADK_STRANDS_STAMP)
	OUTCOME_TELEMETRY_ADK_STRANDS=1 $(ADK_STRANDS_VENV)/bin/python -m pytest -p no:cacheprovider tests/adk_integration tests/strands_integration $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/outcome-telemetry demo $(DEMO_ARGS)

# The suite runs on every core (pytest-xdist): many tests wait on a real server (Prometheus,
# PostgreSQL, Chromium, gunicorn), and each worker starts its own. PYTEST_WORKERS=0 runs it in one
# process, e.g. to debug a failure with -x or --pdb.
PYTEST_WORKERS ?= auto
# Only the plugins the suite uses: pytest rewrites the assertions of every module of every
# installed plugin's distribution (LangSmith's comes with langchain-core), which cost seconds of
# each worker's start-up.
PYTEST_PLUGINS := -p pytest_asyncio.plugin -p anyio.pytest_plugin -p _hypothesis_pytestplugin -p xdist.plugin -p pytest_outcome_telemetry

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE): every
# worker and every subprocess a test starts would otherwise compile the package and the test
# modules (assertions rewritten) again.
test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $(PY) -m pytest $(PYTEST_PLUGINS) -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# Every benchmark, then their figures into docs/benchmarks.md's generated block (BENCH_ARGS="--quick"
# to check they run; a quick or partial run writes nothing unless given --docs PATH).
bench: $(STAMP)
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# mypy (strict, configured in pyproject.toml) and ruff (its [tool.ruff] tables).
lint: $(STAMP)
	$(PY) -m mypy
	$(VENV)/bin/ruff check telemetry tests benchmarks examples pytest_outcome_telemetry.py

clean:
	rm -rf $(VENV) $(CREWAI_VENV) $(ADK_STRANDS_VENV) build dist .pytest_cache demo-output
