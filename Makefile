# FerryMQ developer commands.
#
#   make up     create .venv if needed, install FerryMQ (what running needs, nothing more) into it, run the
#               local stack (`ferrymq up`)
#   make install-spark
#               add what `ferrymq spark ...` needs (pyspark, pyarrow: the `spark` extra) to that install
#   make test   install FerryMQ with its test tools (and the e2e tests' npm packages, botocore's
#               query-protocol SQS model, and Debian's chromium and chromium-driver where missing), then ruff,
#               FerryMQ's bytecode (`make bytecode`) and the whole test suite, in TEST_PROCESSES (2) pytest
#               processes; the tests download nothing
#   make dist   a wheel in dist/
#   make deploy-local
#               deploy template.yaml into MiniStack (a local AWS emulator, installed into .cache/ministack) through
#               its CloudFormation API, start the storage workers against it, print
#               FERRYMQ_DEPLOYED endpoint=<API Gateway URL>; runs until interrupted (ferrymq.infra.deploy_local)
#   make image  the storage-worker image (storage_workers/Dockerfile) as ferrymq-worker: docker where it runs, else
#               buildah with chroot isolation (no container runtime needed); PYTHON_IMAGE names the base
#   make bench  FerryMQ against a null server and LocalStack's SQS (benchmarks/compare.py), with the README's chart
#
# build-FrontendFunction and build-FerryMQLayer are called by `sam build` (BuildMethod: makefile in
# template.yaml) with ARTIFACTS_DIR set.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Reinstall only when the project's metadata changes; pip's own cache keeps reinstalls quick. The test install
# includes the runtime one.
INSTALLED := $(VENV)/.ferrymq-installed
TEST_INSTALLED := $(VENV)/.ferrymq-test-installed
# The AWS SDK for JavaScript for tests/e2e/test_js_sdk.py, exactly as the committed lock file pins it.
JS_DIR := tests/e2e/js
JS_INSTALLED := $(JS_DIR)/node_modules/.ferrymq-installed
# botocore 1.31.80's query-protocol SQS model, which the wire-protocol and e2e tests check against
# (tests/support/legacy_sqs_model.py); extracted into .cache only while it is missing.
SQS_QUERY_MODEL := .cache/models/sqs/2012-11-05/service-2.json
# Headless Chromium and its WebDriver from Debian's packages for the dashboard's browser test
# (tests/e2e/test_dashboard_browser.py), installed only where either is missing; the marker makes it once.
BROWSER_INSTALLED := .cache/.ferrymq-browser-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# MiniStack, the local AWS emulator of the offline deploy lane, in a venv of its own (its dependencies stay out of
# FerryMQ's), on the same Python: it runs the function in process, with the layer built for that Python.
MINISTACK := .cache/ministack/bin/ministack
# The storage-worker image's base; where no registry is reachable, a local one (docs/design/deployable-shape.md
# says how one was made from Debian's packages with debootstrap).
PYTHON_IMAGE ?= python:3.11-slim-bookworm

# LocalStack on the host, for tests/e2e/test_localstack_host.py and benchmarks/compare.py: localstack-core needs
# Python 3.13 (from pyenv here). `make test` installs it where such a Python exists; elsewhere that test says it
# was skipped and why.
LOCALSTACK_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python) $(shell command -v python3.13))
LOCALSTACK_VENV := .cache/localstack
LOCALSTACK := $(if $(LOCALSTACK_PYTHON),$(LOCALSTACK_VENV)/bin/python)

# FerryMQ's own modules as bytecode. An editable install compiles none of them, and where PYTHONDONTWRITEBYTECODE is
# set (as in many CI sandboxes) no process writes any: each would compile every module it imports again, about a
# third of the CPU of an admin command and a good part of a stack's start. compileall writes only what is missing or
# older than its source; Python still reads bytecode with that variable set, and ignores any that is out of date.
SOURCE_DIRS := layers/ferrymq/python functions storage_workers infra spark tests

.PHONY: bench install install-spark up test lint bytecode sqs-query-model browser dist build-FrontendFunction build-FerryMQLayer layer-library

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -e .
	touch $(INSTALLED)

$(TEST_INSTALLED): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -e '.[test]'
	touch $(TEST_INSTALLED) $(INSTALLED)

install: $(TEST_INSTALLED)

# The usage jobs' packages only (the test install has them already).
install-spark: $(INSTALLED)
	$(BIN)/python -m pip install -e '.[spark]'

# npm ci first removes node_modules, marker included: the marker is back only after a complete install.
$(JS_INSTALLED): $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund
	touch $(JS_INSTALLED)

# Order-only on the install: a reinstall does not fetch the model again.
$(SQS_QUERY_MODEL): | $(TEST_INSTALLED)
	$(BIN)/python -m tests.support.legacy_sqs_model --install

sqs-query-model: $(SQS_QUERY_MODEL)

$(BROWSER_INSTALLED):
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "chromium and chromedriver are installed"; \
	else \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; \
	fi
	mkdir -p $(dir $(BROWSER_INSTALLED))
	touch $(BROWSER_INSTALLED)

browser: $(BROWSER_INSTALLED)

bytecode: $(INSTALLED)
	$(BIN)/python -m compileall -q $(SOURCE_DIRS)

up: $(INSTALLED) bytecode
	$(BIN)/ferrymq up

lint: $(TEST_INSTALLED)
	$(BIN)/ruff check .

# pytest keeps the test modules it rewrites for its assertions in __pycache__ only where bytecode may be written:
# without that cache it rewrites all of them on every run (collection 8.6 s instead of 3.9 s).
# Two pytest processes (pytest-xdist), each taking whole files, so that a module's stack is started once: most of
# the suite waits on stacks and sockets rather than computing, and on two cores the whole run took 13.5 minutes
# instead of 23.7 in the same hour. Each process starts its own session stacks.
TEST_PROCESSES ?= 2
test: lint bytecode $(JS_INSTALLED) $(SQS_QUERY_MODEL) $(BROWSER_INSTALLED) $(MINISTACK) $(LOCALSTACK)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_PROCESSES) --dist loadfile

$(MINISTACK): | $(BIN)/python
	$(BIN)/python -m venv .cache/ministack
	.cache/ministack/bin/python -m pip install 'ministack[full]==1.5.33'

deploy-local: $(INSTALLED) $(MINISTACK)
	$(BIN)/python -m ferrymq.infra.deploy_local --ministack $(MINISTACK)

image:
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
		docker build --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) -f storage_workers/Dockerfile -t ferrymq-worker . ; \
	else \
		buildah bud --isolation chroot --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) -f storage_workers/Dockerfile \
			-t ferrymq-worker . ; \
	fi

# setuptools reuses build/ between builds: a module since moved or removed would otherwise stay in the wheel.
dist: $(INSTALLED)
	rm -rf build
	$(BIN)/python -m pip wheel --no-deps --wheel-dir dist .

# The function's code package: the front end and the metadata layer as the ferrymq.frontend and
# ferrymq.metadata packages; the layer's ferrymq package adds them to its path (pkgutil.extend_path), so the
# handler ferrymq.frontend.app.app imports from /var/task with the shared library from /opt/python.
build-FrontendFunction:
	mkdir -p "$(ARTIFACTS_DIR)/ferrymq"
	cp -R functions/frontend "$(ARTIFACTS_DIR)/ferrymq/frontend"
	cp -R functions/metadata "$(ARTIFACTS_DIR)/ferrymq/metadata"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +

# The shared library alone (the first half of build-FerryMQLayer; the Lambda bundle's test builds only it).
layer-library:
	mkdir -p "$(ARTIFACTS_DIR)/python"
	cp -R layers/ferrymq/python/ferrymq "$(ARTIFACTS_DIR)/python/"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +

# Wheels for the Lambda runtime (Linux x86_64, CPython 3.11), whatever machine builds the layer.
build-FerryMQLayer: layer-library
	$(PYTHON) -m pip install --requirement layers/ferrymq/requirements.txt --target "$(ARTIFACTS_DIR)/python" \
		--platform manylinux2014_x86_64 --implementation cp --python-version 3.11 --only-binary=:all: --upgrade

$(LOCALSTACK_VENV)/bin/python:
	$(LOCALSTACK_PYTHON) -m venv $(LOCALSTACK_VENV)
	$(LOCALSTACK_VENV)/bin/pip install 'localstack-core[runtime]' 'cbor2<6' 'pyopenssl<26' \
		'cryptography>=45.0.7,<47' 'service-identity<26'

bench: $(INSTALLED) $(LOCALSTACK_VENV)/bin/python
	$(BIN)/python -m pip install -e '.[bench]'
	$(BIN)/python benchmarks/compare.py --localstack-python $(LOCALSTACK_VENV)/bin/python --chart docs/bench/compare.png
