# make demo: a virtual environment, the package, the demo agent against the simulator.
# make test: every system package and Python package the tests need, the linter (make lint)
#            and the type checker (make typecheck), then the whole suite (current SDK line in
#            .venv, the older httpx-based line in .venv-legacy), the core suites again on
#            every other CPython 3.10-3.13 pyenv has here (make test-pythons), the release
#            checks on the built sdist and wheel (tests/test_packaging.py, in the suite) and
#            the documentation site built with --strict (make docs-check).
# make docs: serve the documentation site on http://127.0.0.1:8000, from a small virtual
#            environment of its own (.venv-docs: the site's packages only).
# make servers: the reference servers the stack tests run (Collector, Jaeger, Prometheus,
#            promtool, Alertmanager, amtool), built from Go modules into $(SERVERS_BIN).

PYTHON ?= python3
# Python caches compiled modules (and pytest its assertion-rewritten test modules) only where
# PYTHONDONTWRITEBYTECODE is unset; a machine that sets it (the one this was measured on does)
# compiles them again in every process: 7 of the 28 CPU-s each pytest process spent
# collecting the suite, in each of make test's dozen pytest processes.  The caches go to
# __pycache__/ (ignored by git; never in the sdist or wheel).
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
LEGACY ?= .venv-legacy
# aider pins openai 2.x and litellm exactly: it gets a virtual environment of its own.
AIDER ?= .venv-aider
# Arize Phoenix, the real trace backend the backend tests send to: a server with its own pins.
PHOENIX ?= .venv-phoenix
# Agent frameworks whose pins conflict with .venv's: google-adk (OpenTelemetry SDK <= 1.44,
# google-genai < 3), AutoGen (protobuf 5.29), Strands (openai < 3, mcp < 2.2), LlamaIndex's
# OpenAI client (openai < 3), CrewAI (pydantic < 2.13, mcp < 2, openai < 3), Semantic Kernel
# (pydantic < 2.14, mcp 1.x).
FRAMEWORKS ?= .venv-frameworks
FRAMEWORK_PINS ?= "google-adk>=2,<3" "autogen-agentchat>=0.7,<0.8" "autogen-ext[openai]>=0.7,<0.8" \
	"strands-agents[openai]>=1.60,<2" "llama-index-core>=0.14,<0.15" "llama-index-llms-openai>=0.6" \
	"crewai>=1.10,<2" "semantic-kernel>=1.40,<2"
PYTEST_ARGS ?=
# Each pytest part runs in two phases (pytest_phases below): first every test not marked
# quiet on TEST_WORKERS xdist worker processes side by side (each takes whole files, so a
# module's shared set-up is made once), then the quiet ones (timing bounds
# too tight for a machine busy with the suite itself) alone, serially.  TEST_WORKERS=0: both
# phases in one process each, as before (to debug one test: PYTEST_ARGS="-k NAME" or plain
# `.venv/bin/python -m pytest tests/...`, which runs serially).  The suite is CPU-bound
# (measured: 1,336 CPU-s in 1,343 s serial), so more workers than cores only add contention.
# More suites at once do no better: test-pythons' versions run beside test-current's and
# test-legacy's first phases took 1,029 s and 1,800 CPU-s where one after the other they
# took 1,020 s and ~1,600 (idle 2-core machine, 2026-12-01), and two suites' tests then
# shared the default OTLP ports (tests/test_exporters.py listens on them).
TEST_WORKERS ?= 2
# make test-pythons runs its three versions side by side already: one process each.
PYTHONS_WORKERS ?= 0
# Where make docs-check builds the site (ignored by git).
DOCS_SITE ?= site
# make docs: the site's own packages ([docs]), not the 1.5 GB test environment.
DOCS_VENV ?= .venv-docs
# The older SDK line, on httpx/httpcore instead of httpx2/httpcore2.
LEGACY_PINS ?= "openai>=1.40,<2" "anthropic>=0.40,<0.50" "mcp>=1.9,<2"
# Debian packages: iptables and libnetfilter-queue for the simulator's kernel-delay mode;
# iproute2 for network namespaces, for servers that must not be reachable from outside
# (Phoenix); Chromium for the --html page's test and the documentation site's (driven
# headless; never downloaded).
SYSTEM_PACKAGES ?= iptables libnetfilter-queue-dev build-essential iproute2 chromium

# The stack's servers, built from Go modules through the Go module proxy (never a binary
# download), at the releases docker-compose.yml pins: the Collector from its builder manifest
# (deploy/otel-collector/otelcol, generated), Jaeger, Prometheus with promtool and
# Alertmanager with amtool (deploy/servers/*/go.mod, one `tool` module each, go.sum pinned).
# Go's own module and build caches (GOMODCACHE, GOCACHE: outside the work tree) hold the
# work, so a build after the first one only links.  The tests find the binaries here
# (AGENT_LATENCY_SERVERS overrides).
GO ?= go
SERVERS_BIN ?= .servers/bin
SERVER_MODULES := deploy/otel-collector/otelcol deploy/servers/jaeger deploy/servers/prometheus \
	deploy/servers/alertmanager
SERVER_SOURCES := $(foreach m,$(SERVER_MODULES),$(m)/go.mod $(m)/go.sum) \
	$(wildcard deploy/otel-collector/otelcol/*.go)

# $(1): an interpreter and pytest's options and paths; $(2): the worker count.  Both phases
# run; the part fails if either failed (a phase that selects nothing passes).
define pytest_phases
	rc=0; $(call pytest_busy_phase,$(1),$(2)) || rc=1; $(call pytest_quiet_phase,$(1)) || rc=1; \
	exit $$rc
endef
define pytest_busy_phase
$(1) -n $(2) --dist loadfile --quiet-tests=skip $(PYTEST_ARGS)
endef
define pytest_quiet_phase
$(1) -n 0 --quiet-tests=only $(PYTEST_ARGS)
endef

# netfilterqueue builds against libnetfilter-queue-dev; without it the kernel-delay tests skip.
define kernel_delay_deps
	if dpkg -s libnetfilter-queue-dev >/dev/null 2>&1; then \
	  $(1)/bin/python -m pip install -q 'netfilterqueue>=1.1'; fi
endef

.PHONY: demo servers pythons test test-current test-legacy test-pythons lint typecheck docs \
	docs-check system-packages bench clean

$(VENV)/.demo-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[simulator,openai,report]'
	touch $@

demo: $(VENV)/.demo-installed
	$(VENV)/bin/agent-latency demo

$(VENV)/.test-installed: pyproject.toml | system-packages
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test,docs]'
	$(call kernel_delay_deps,$(VENV))
	touch $@

$(LEGACY)/.test-installed: pyproject.toml | system-packages
	$(PYTHON) -m venv $(LEGACY)
	$(LEGACY)/bin/python -m pip install -q --upgrade pip
	$(LEGACY)/bin/python -m pip install -q -e '.[test-legacy]' $(LEGACY_PINS)
	$(call kernel_delay_deps,$(LEGACY))
	touch $@

# aider-chat with its own pins, plus this project without extras (what `agent-latency run`
# needs in the interpreter it instruments); the acceptance tests find it through
# AGENT_LATENCY_AIDER_PYTHON.
$(AIDER)/.test-installed: pyproject.toml
	$(PYTHON) -m venv $(AIDER)
	$(AIDER)/bin/python -m pip install -q --upgrade pip
	$(AIDER)/bin/python -m pip install -q 'aider-chat>=0.86,<0.87'
	$(AIDER)/bin/python -m pip install -q -e . pytest
	touch $@

# The frameworks with their own pins, plus this project without extras (what `agent-latency
# run` needs in the interpreter it instruments); tests/acceptance/test_function_tools.py finds
# it through AGENT_LATENCY_FRAMEWORKS_PYTHON.
$(FRAMEWORKS)/.test-installed: pyproject.toml
	$(PYTHON) -m venv $(FRAMEWORKS)
	$(FRAMEWORKS)/bin/python -m pip install -q --upgrade pip
	$(FRAMEWORKS)/bin/python -m pip install -q $(FRAMEWORK_PINS) -e .
	touch $@

$(PHOENIX)/.test-installed: pyproject.toml
	$(PYTHON) -m venv $(PHOENIX)
	$(PHOENIX)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX)/bin/python -m pip install -q 'arize-phoenix>=12,<21'
	touch $@

servers: $(SERVERS_BIN)/.built

# Prometheus and Alertmanager report the release they were built from (`--version`, from
# the module's VERSION file, as their own release builds stamp it; the module is downloaded
# first, and a missing VERSION fails the build rather than stamping an empty version).
# Alertmanager's module lacks its compiled web UI (ui/app/dist, which it embeds): it is
# built from a vendor copy with a placeholder page there, so it serves the API only, as the
# other builds here do (`go mod vendor -e` reports the missing files it is about to get:
# expected).
AM_UI := vendor/github.com/prometheus/alertmanager/ui/app/dist
$(SERVERS_BIN)/.built: $(SERVER_SOURCES) deploy/servers/alertmanager/ui-placeholder.html
	@mkdir -p $(SERVERS_BIN)
	@start=$$(date +%s); out=$(abspath $(SERVERS_BIN))/; \
	$(GO) -C deploy/otel-collector/otelcol build -o $$out . && \
	$(GO) -C deploy/servers/jaeger build -o $$out tool && \
	stamp() { $(GO) -C deploy/servers/$$1 mod download github.com/prometheus/$$1 && \
	  dir=$$($(GO) -C deploy/servers/$$1 list -mod=mod -m -f '{{.Dir}}' github.com/prometheus/$$1) && \
	  test -s "$$dir/VERSION" && \
	  echo "-X github.com/prometheus/common/version.Version=$$(cat $$dir/VERSION)"; } && \
	pstamp=$$(stamp prometheus) && \
	$(GO) -C deploy/servers/prometheus build -o $$out -ldflags "$$pstamp" tool && \
	astamp=$$(stamp alertmanager) && \
	$(GO) -C deploy/servers/alertmanager mod vendor -e && \
	for ui in elm mantine; do mkdir -p deploy/servers/alertmanager/$(AM_UI)/$$ui && \
	  cp deploy/servers/alertmanager/ui-placeholder.html \
	    deploy/servers/alertmanager/$(AM_UI)/$$ui/index.html || exit 1; done && \
	$(GO) -C deploy/servers/alertmanager build -mod=vendor -o $$out \
	  -ldflags "$$astamp" tool && \
	echo "servers built in $$(( $$(date +%s) - start )) s into $(SERVERS_BIN)"
	@touch $@

# Every CPython 3.10+ that pyenv has here, each in a venv with this package (no extras): the
# exit tests run a program on each (tests/reliability/test_exit_pythons.py; it makes any venv
# missing here itself). 3.12.0 and 3.12.1 refuse new threads at interpreter shutdown.
PYENV_PYTHONS = $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.1[0-9].*/bin/python)
pythons:
	@for p in $(PYENV_PYTHONS); do v=$$(basename $$(dirname $$(dirname $$p))); \
	  test -f .venv-py$$v/.installed && continue; \
	  $$p -m venv --clear .venv-py$$v && .venv-py$$v/bin/python -m pip install -q -e . \
	    && touch .venv-py$$v/.installed; done

system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing system packages:$$missing"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } \
	      || echo "WARNING: could not install$$missing: their tests will skip or fail"; \
	  else echo "not root: skipping system packages$$missing (their tests skip)"; fi; \
	fi

# The CPU time (ticks of 1/100 s) used so far by the recipe shell's finished children, user
# and system (/proc/PID/stat's cutime and cstime): each part's CPU-seconds beside its wall
# time, which says how far more workers could take it on these cores.  Empty where /proc is
# not Linux's.
children_cpu = awk '{ print $$16 + $$17 }' /proc/$$$$/stat 2>/dev/null

# Every part runs even when one fails; the failed ones are listed at the end (and fail make).
TEST_PARTS := lint typecheck test-current test-legacy docs-check test-pythons
test: system-packages servers $(VENV)/.test-installed $(LEGACY)/.test-installed $(AIDER)/.test-installed \
      $(FRAMEWORKS)/.test-installed $(PHOENIX)/.test-installed pythons
	@failed=""; for part in $(TEST_PARTS); do \
	  echo "== make $$part"; started=$$(date +%s); cpu=$$($(children_cpu)); \
	  $(MAKE) --no-print-directory $$part || failed="$$failed $$part"; \
	  echo "== make $$part: $$(( $$(date +%s) - started )) s$$( [ -n "$$cpu" ] && \
	    echo " ($$(( ($$($(children_cpu)) - cpu) / 100 )) CPU-s)")"; \
	done; \
	if [ -n "$$failed" ]; then echo; for part in $$failed; do echo "make test: FAILED: make $$part"; \
	  done; exit 1; fi; echo "make test: every part passed ($(TEST_PARTS))"

# The core suites on each CPython 3.10-3.13 that pyenv has here (the newest patch release of
# each), in a venv of its own with [test] and, as .venv, netfilterqueue for the kernel-delay
# tests (.venv-test-pyX.Y); the version .venv runs is skipped (test-current runs the whole
# suite on it), and a version that is not installed is one line, not a failure.  The
# versions' tests not marked quiet run side by side (most of the suites' time is waiting on servers), without the tests marked slow (test-current runs
# those), each into .venv-test-pyX.Y.log; then each version's quiet tests, one version after
# another, so that they too have the machine alone (run beside the other versions' suites,
# 3.10's quiet tests once shared two cores with two CPU-bound suites).  Each phase's summary
# line is printed, and any that failed fails the target once all are done.
# CORE_PYTHONS="3.13" runs one.
CORE_SUITES ?= tests/instrumentation tests/tools tests/network tests/budget tests/report
CORE_PYTHONS ?= 3.10 3.11 3.12 3.13
PYENV_VERSIONS_DIR = $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions
CORE_PYTEST = -m pytest -q -p no:cacheprovider -m "not slow" $(CORE_SUITES)
test-pythons: $(VENV)/.test-installed
	@main=$$($(VENV)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	ran=""; \
	for v in $(CORE_PYTHONS); do \
	  if [ "$$v" = "$$main" ]; then \
	    echo "Python $$v: skipped here (make test-current runs the whole suite on it)"; continue; fi; \
	  p=$$(ls -d $(PYENV_VERSIONS_DIR)/$$v.*/bin/python 2>/dev/null | sort -V | tail -n 1); \
	  if [ -z "$$p" ]; then echo "Python $$v: not installed here (pyenv versions), skipped"; \
	    continue; fi; \
	  venv=.venv-test-py$$v; ran="$$ran $$venv"; rm -f $$venv/core.status; \
	  ( if [ ! -f $$venv/.installed ]; then \
	      $$p -m venv --clear $$venv && $$venv/bin/python -m pip install -q --upgrade pip && \
	      $$venv/bin/python -m pip install -q -e '.[test]' && \
	      $(call kernel_delay_deps,$$venv) && touch $$venv/.installed; fi && \
	    $$venv/bin/python -V && \
	    $(call pytest_busy_phase,$$venv/bin/python $(CORE_PYTEST),$(PYTHONS_WORKERS)); \
	    echo $$? > $$venv/core.status \
	  ) > $$venv.log 2>&1 & \
	done; wait; \
	for venv in $$ran; do \
	  [ -f $$venv/.installed ] || continue; \
	  $(call pytest_quiet_phase,$$venv/bin/python $(CORE_PYTEST)) >> $$venv.log 2>&1 || \
	    echo 1 > $$venv/core.status; done; \
	failed=""; \
	for venv in $$ran; do \
	  echo "== core suites on $$(head -n 1 $$venv.log): $$(grep -E ' in [0-9.]+s' $$venv.log | \
	    sed -e 's/^=* *//' -e 's/ *=*$$//' | awk 'NR > 1 { printf "; " } { printf "%s", $$0 }')"; \
	  grep -E '^(FAILED|ERROR) ' $$venv.log | head -n 20; \
	  [ "$$(cat $$venv/core.status 2>/dev/null)" = 0 ] || failed="$$failed $$venv"; done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed (their logs: <venv>.log)"; exit 1; fi

# The rule set is [tool.ruff.lint] in pyproject.toml; checks only, never reformats.
LINT_PATHS ?= src tests benchmarks deploy
lint: $(VENV)/.test-installed
	$(VENV)/bin/python -m ruff check $(LINT_PATHS)

# [tool.mypy] in pyproject.toml: src/, in the venv that has every SDK we type against.
typecheck: $(VENV)/.test-installed
	$(VENV)/bin/python -m mypy

test-current: $(VENV)/.test-installed servers
	AGENT_LATENCY_SERVERS=$(abspath $(SERVERS_BIN)) \
	AGENT_LATENCY_AIDER_PYTHON=$(abspath $(AIDER))/bin/python \
	AGENT_LATENCY_FRAMEWORKS_PYTHON=$(abspath $(FRAMEWORKS))/bin/python \
	AGENT_LATENCY_PHOENIX=$(abspath $(PHOENIX))/bin/phoenix \
	  $(call pytest_phases,$(VENV)/bin/python -m pytest,$(TEST_WORKERS))

# The tests that talk to the SDKs, again on their older httpx-based releases.
test-legacy: $(LEGACY)/.test-installed
	$(call pytest_phases,$(LEGACY)/bin/python -m pytest -m "not current_only" tests/simulator \
	  tests/instrumentation tests/network tests/tools/test_mcp.py tests/tools/test_subprocess.py,$(TEST_WORKERS))

# --strict: a broken link, a page missing from the nav or an API name that no longer resolves
# fails the build.
docs-check: $(VENV)/.test-installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/python -m mkdocs build --strict --site-dir $(DOCS_SITE)

$(DOCS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q -e '.[docs]'
	touch $@

docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/python -m mkdocs serve --dev-addr 127.0.0.1:8000

bench: $(VENV)/.test-installed
	$(VENV)/bin/python -m pip install -q -e '.[bench]'
	# Benchmarks print figures and verdicts; a missed goal is reported, never a failed make.
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(VENV)/bin/python $$b || echo "($$b exited $$?)"; done

clean:
	rm -rf $(VENV) $(LEGACY) $(AIDER) $(FRAMEWORKS) $(DOCS_VENV) .venv-py3* .venv-test-py3* \
	  .servers .pytest_cache .hypothesis .agent-latency $(DOCS_SITE) dist
