# kailab — the two commands a newcomer needs:
#   make exercises   bring a lab up (if none is running) and run the everyday exercises against it
#   make exercises-all  the same, and the replays, fills and operator exercises (labs of their own)
#   make unit        the unit tier alone (tests/unit: no lab, no network; it reads the registered sources)
#   make test        the whole suite: the unit tier first (failing fast), then the live tier (tests/live: real labs)
PYTHON      ?= python3
VENV        ?= .venv
RUNTIME     ?= binary# binary (no Docker), kind, existing, or auto (kind when a Docker engine answers)
FLEET       ?= small
KAI_VERSION ?= v0.17.0
NAME        ?= default
KUBECONFIG  ?= $(HOME)/.kube/config# RUNTIME=existing: the cluster to adopt (your environment's KUBECONFIG when set)
LABS        ?= auto# exercises on labs side by side (pytest -n): auto = as this machine holds them; 0 = one lab
UNIT_WORKERS ?= auto# the unit tier on workers side by side (pytest -n)
TEST_LABS   ?= auto# the test suite on workers side by side, each with labs of its own (pytest -n); 0 = one process
BIN          = $(VENV)/bin
KAILAB       = $(BIN)/kailab
UP_FLAGS     = --runtime $(RUNTIME) --fleet $(FLEET) --kai-version $(KAI_VERSION) --name $(NAME) \
               $(if $(filter existing,$(strip $(RUNTIME))),--kubeconfig $(KUBECONFIG))

# Python keeps compiled modules (and pytest its rewritten tests) beside the sources, even where the caller's
# environment says not to: without them every `kailab` process a test starts compiled kailab again (the
# unit tier on a fresh clone: 62 s with PYTHONDONTWRITEBYTECODE=1, 53 s without; 48 s the next time)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup tools lab-up lab-down lab-status unit test test-full exercises exercises-all bench course-docs clean

setup: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

tools: setup            ## build the Go binaries into the cache (never rebuilds what is cached)
	$(KAILAB) tools build --kai-version $(KAI_VERSION)

lab-up: setup           ## bring the lab up (no-op when it is already up)
	$(KAILAB) up $(UP_FLAGS)

lab-down: setup         ## stop every lab process and remove its state
	$(KAILAB) down --name $(NAME)

lab-status: setup
	$(KAILAB) status --name $(NAME)

unit: setup             ## the unit tier: no lab, no network (it reads the registered sources and KAI's renderer, `kailab tools build`)
	$(BIN)/pytest tests/unit -n $(UNIT_WORKERS)

# The `alone` phase in two streams (xdist groups): the heavy one (the vCluster trial, then the fan-out), the
# light one beside it (KAI's operator suites, then the kind lab's own tests); never beside the main phase.
ALONE := -n 2 --dist loadgroup
# Both live phases write what they deselected (no Docker engine, no KAI) to one file; the last says it all in red, at the end.
test: unit              ## then the live tier (but the `full` runs): labs on workers side by side, then the tests that need the machine alone
	not_run=$$(mktemp); trap 'rm -f "$$not_run"' EXIT; \
	$(BIN)/pytest tests/live -n $(TEST_LABS) --dist loadgroup -m "not alone and not full" --kailab-not-run "$$not_run" || exit $$?; \
	$(BIN)/pytest tests/live -m "alone and not full" $(ALONE) --kailab-not-run "$$not_run"; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]  # 5: none selected (no Docker engine, say)

test-full: unit         ## the whole live tier, the long `full` runs too (the 1/8 Alibaba fill, KAI's three e2e suites, …)
	not_run=$$(mktemp); trap 'rm -f "$$not_run"' EXIT; \
	$(BIN)/pytest tests/live -n $(TEST_LABS) --dist loadgroup -m "not alone" --kailab-not-run "$$not_run" || exit $$?; \
	$(BIN)/pytest tests/live -m alone $(ALONE) --kailab-not-run "$$not_run"; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

exercises: lab-up       ## the everyday set: on the running lab and, with LABS, labs of its kind beside it (evidence/report.html too)
	$(BIN)/pytest exercises/ --kailab-lab $(NAME) -n $(LABS) --dist worksteal

exercises-all: setup    ## the everyday set, and the replays, fills and operator exercises (minutes each, on labs of their own)
	@$(KAILAB) trace source alibaba-gpu-2023 >/dev/null  # the fill reads Alibaba's trace: refused in seconds, before any lab, when it is not registered
	$(MAKE) lab-up
	$(BIN)/pytest exercises/ --kailab-all --kailab-lab $(NAME) -n $(LABS) --dist worksteal

bench: setup
	$(KAILAB) bench

course-docs: setup      ## regenerate docs/course from the exercise files
	$(KAILAB) course --render

clean:
	rm -rf $(VENV) .pytest_cache
