# Set-up and checks. `make test` works on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install proto test test-pure lint bench soak golden run clean buf-lint

PROTO_SRC := protos/pinochle/referee/v1/referee.proto
PROTO_OUT := protos/pinochle/referee/v1/referee_pb2.py

# One stamp per build of the core, so that switching between the two rebuilds it.
NATIVE_BUILD := $(if $(filter 1,$(PINOCHLE_REFEREE_PURE)),pure,compiled)
NATIVE_STAMP := $(VENV)/.native-$(NATIVE_BUILD)
NATIVE_SOURCES := $(wildcard referee/rules/*.py referee/engine/*.py)

# The editable install itself is pure Python; the rules core is compiled by the rule below.
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PINOCHLE_REFEREE_PURE=1 $(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The rules core compiled in place by mypyc (setup.py says which modules and why), again after
# any of its sources changes, so what runs is never older than its source (the tests and the
# commands refuse to run a stale one: referee/compiled.py). options.py is not compiled, but the
# compiled modules are built from its types, so it counts too. PINOCHLE_REFEREE_PURE=1 removes the compiled modules instead.
$(NATIVE_STAMP): $(NATIVE_SOURCES) setup.py | $(STAMP)
	rm -f $(VENV)/.native-*
	find referee -name '*.so' -delete
ifeq ($(NATIVE_BUILD),compiled)
	@echo "rules core: compiling with mypyc (about 30 s) ..."
	@$(BIN)/python setup.py --quiet build_ext --inplace > $(VENV)/native-build.log 2>&1 \
		|| { cat $(VENV)/native-build.log; echo "rules core: the compilation failed (above);" \
			"without a C compiler and the Python headers, PINOCHLE_REFEREE_PURE=1 make install" \
			"keeps it pure Python"; exit 1; }
else
	@echo "rules core: pure Python (PINOCHLE_REFEREE_PURE=1)"
endif
	touch $@

# Stubs (and .pyi typing stubs) are generated from protos/ by the build, never committed.
$(PROTO_OUT): $(PROTO_SRC) $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m grpc_tools.protoc -I . \
		-I "$$($(BIN)/python -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')" \
		--python_out=. --grpc_python_out=. --mypy_out=. --mypy_grpc_out=. $(PROTO_SRC)

proto: $(PROTO_OUT)

install: $(STAMP) $(PROTO_OUT) $(NATIVE_STAMP)

# pytest runs last so the run closes with its summary line.
test: install
	$(BIN)/ruff check referee tests bench clients/python
	$(BIN)/mypy
	$(MAKE) buf-lint
	$(MAKE) node-test
	$(MAKE) test-pure
	$(BIN)/pytest

# The rules core's own tests once more on the pure-Python build (PINOCHLE_REFEREE_PURE=1), in a
# copy of the tree without the compiled modules, so both builds stay tested.
PURE_TREE := build/pure
PURE_TESTS := tests/test_native.py tests/test_rules_core.py tests/test_engine.py \
	tests/test_violations.py tests/test_two_handed.py tests/test_melds.py tests/test_options.py \
	tests/test_vectors.py tests/test_golden.py tests/test_audit.py tests/test_rules_mutants.py \
	tests/test_engine_mutants.py tests/test_two_handed_mutants.py tests/test_views_actions_mutants.py \
	tests/test_audit_mutants.py tests/test_engine_names_mutants.py
test-pure: install
	rm -rf $(PURE_TREE) && mkdir -p $(PURE_TREE)
	tar --exclude="*.so" --exclude=__pycache__ -cf - pyproject.toml setup.py referee tests protos examples \
		clients/python | tar -xf - -C $(PURE_TREE)
	cd $(PURE_TREE) && PINOCHLE_REFEREE_PURE=1 $(CURDIR)/$(BIN)/pytest -p no:cacheprovider $(PURE_TESTS)

lint: install buf-lint
	$(BIN)/ruff check referee tests bench clients/python
	$(BIN)/ruff format --check referee tests bench clients/python
	$(BIN)/mypy

bench: install
	$(BIN)/python -m bench.engine
	$(BIN)/python -m bench.service
	$(BIN)/python -m bench.game_memory
	$(BIN)/python -m bench.instructions
	$(BIN)/python -m bench.replicas

# Not part of bench (it runs for 5 minutes): one server under continuous whole games, its memory
# sampled; SOAK_ARGS passes options, e.g. make soak SOAK_ARGS='--duration 900'.
soak: install
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

golden: install
	$(BIN)/python -m tests.golden_gen

run: install
	$(BIN)/pinochle-referee serve

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build
	find referee -name '*.so' -delete
	find protos -name '*_pb2*.py*' -delete

# Contract hygiene: buf lint (STANDARD, protos/buf.yaml) and buf breaking against the previous
# commit's protos. buf comes from the npm package @bufbuild/buf, pinned in tools/buf/ (npm ci with
# the committed lock file; the binary ships inside the package's platform dependency).
BUF_DIR := tools/buf
BUF := $(BUF_DIR)/node_modules/.bin/buf
BUF_STAMP := $(BUF_DIR)/node_modules/.installed
BUF_AGAINST := HEAD~1

$(BUF_STAMP): $(BUF_DIR)/package.json $(BUF_DIR)/package-lock.json
	cd $(BUF_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $(BUF_STAMP)

buf-lint: $(BUF_STAMP)
	$(BUF) lint protos
	@if ! git rev-parse --verify --quiet '$(BUF_AGAINST)^{commit}' >/dev/null 2>&1; then \
		echo "buf breaking: skipped: no commit $(BUF_AGAINST) to compare with (first commit, shallow clone or no git)"; \
	elif ! git ls-tree -r --name-only '$(BUF_AGAINST)' -- protos | grep -q '\.proto$$'; then \
		echo "buf breaking: skipped: $(BUF_AGAINST) has no .proto files under protos/ yet"; \
	else \
		echo "$(BUF) breaking protos --against '.git#ref=$(BUF_AGAINST),subdir=protos'"; \
		$(BUF) breaking protos --against '.git#ref=$(BUF_AGAINST),subdir=protos'; \
	fi

# The Node.js/TypeScript client (clients/node/): npm ci from its committed lock file; its build
# generates the stubs from protos/; its tests start a real server from this venv
# (REFEREE_SERVE_CMD overrides the command, REFEREE_ADDRESS points them at a running server).
.PHONY: node-test
node-test: install
	cd clients/node && npm ci --no-audit --no-fund && npm test
