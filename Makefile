# Everything a fresh machine with python3 and git needs: `make demo`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LOCK := requirements-lock.txt

.PHONY: demo test check bench soak clean e2e lock

# The venv holds exactly the lock (hash-pinned, wheels only; --clear drops what an older
# lock put there), and gitguard is built from it too (the lock's setuptools, no isolation).
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install --quiet --require-hashes --only-binary=:all: -r $(LOCK)
	@# compat: a plain path entry in a .pth file. The default editable finder imports pathlib,
	@# re and importlib.util in every interpreter start (28 ms of 50), which every hook pays.
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e . \
		--config-settings editable_mode=compat
	@# An editable install writes no bytecode; with PYTHONDONTWRITEBYTECODE set every gitguard
	@# process would recompile each module (over a second per CLI start under load).
	$(BIN)/python -m compileall -q gitguard
	touch $(STAMP)

# Refresh the lock to the newest versions pyproject.toml's ranges admit (and
# requirements-lock.in's tools), for every Python the project claims and every platform.
lock: $(STAMP)
	$(BIN)/uv pip compile --quiet --upgrade --universal --python-version 3.11 \
		--generate-hashes --extra dev -o $(LOCK) pyproject.toml requirements-lock.in

demo: $(STAMP)
	$(BIN)/gitguard demo

# The memory check: glibc fills freed memory with a pattern (MALLOC_PERTURB_) and Python
# allocates through malloc, so a buffer libgit2 reads after Python freed it shows as wrong
# bytes or a crash instead of passing by luck. The tests that hand buffers to libgit2:
# patches (installed packages' large modules among them), snapshots, rollback, the daemon,
# and the field suite's whole-package formatter run and edit of click's 148 KB core.py.
MEMCHECK := tests/git/test_patch_text.py tests/snapshot/test_snapshot.py \
	tests/rollback/test_rollback.py tests/daemon/test_daemon_calls_match_cli.py \
	tests/field/test_field_base.py

# Two workers (pytest-xdist): the suite waits on git, fsync and daemons far more than it
# computes (load below 1 over an 8.5 min one-process run here; 4.8 min with two). Tests
# marked `serial` (a machine-wide inotify limit, deadlines raced against the load) run
# alone after.
test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 -m "not serial" tests
	$(BIN)/python -m pytest -q -p no:cacheprovider -m serial tests
	MALLOC_PERTURB_=165 PYTHONMALLOC=malloc $(BIN)/python -m pytest -q -p no:cacheprovider $(MEMCHECK)

check: $(STAMP)
	$(BIN)/ruff check gitguard tests bench e2e
	$(BIN)/mypy
	@# The package's import graph has no cycle (local imports count).
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_import_graph.py

# The real agent CLIs (e2e/package.json, pinned by its lock file); npm needs the registry only.
E2E_STAMP := e2e/node_modules/.installed
$(E2E_STAMP): e2e/package.json e2e/package-lock.json
	cd e2e && npm ci --no-audit --no-fund --loglevel=error
	touch $(E2E_STAMP)

# Real Claude Code and Codex runs against a scripted model on 127.0.0.1 (not part of `make test`).
# GITGUARD_E2E_CAPTURE=1 also rewrites fixtures/claude_code and fixtures/codex.
e2e: $(STAMP) $(E2E_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -c e2e/pytest.ini e2e

bench: $(STAMP)
	$(BIN)/python -m bench.run

# The library soak, then the session fuzz through the real Claude Code CLI (e2e/soak.py):
# GITGUARD_SOAK_SEEDS seeds (`make e2e` runs 3), each one session of ~35 tool calls and
# ~18 user writes; the counts of every seed go to .soak/e2e-soak.jsonl, summed at the end.
SOAK_SEEDS ?= 0-199
soak: $(STAMP) $(E2E_STAMP)
	GITGUARD_SOAK_TRIALS=10000 $(BIN)/python -m pytest -q -p no:cacheprovider tests -m soak
	mkdir -p .soak && rm -f .soak/e2e-soak.jsonl
	GITGUARD_SOAK_SEEDS=$(SOAK_SEEDS) GITGUARD_SOAK_LOG=.soak/e2e-soak.jsonl \
		$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 -c e2e/pytest.ini \
		e2e/test_soak.py; status=$$?; \
		$(BIN)/python -m e2e.soak summary .soak/e2e-soak.jsonl; exit $$status

clean:
	rm -rf $(VENV) build .bench .soak gitguard/nativeclient
