# hvbench: `make demo` and `make test` install what they need (as root on Debian 12):
# the demo the APT_DEMO packages only, the tests every group below.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
STAMP   := .make

# Debian packages, in groups: each is installed by its own stamp target, and only the
# packages of a group that are missing are installed (an installed package is never
# upgraded; apt, dpkg and systemd are not named). `make demo` installs APT_DEMO only;
# `make unit`, `integration`, `test` and `test-fast` add the groups their tests use.
#
# The demo: QEMU and the workload programs (the native side runs them too), what
# `hvbench image build` needs to assemble the guest image from Debian packages, the
# propagation workloads' servers and clients (dropbear, rsync, curl, zstd), and the
# headers and compiler that build libvirt-python (a dependency of hvbench) in the venv.
APT_DEMO := qemu-system-x86 qemu-utils fio iperf3 httperf wrk stress-ng lighttpd \
	busybox-static cpio kmod lz4 iproute2 python3-venv ca-certificates squashfs-tools \
	dropbear-bin openssh-client rsync curl zstd libvirt-dev pkg-config gcc python3-dev
# libvirt platforms (kind = "libvirt") and their tests: the daemons, virsh, and xmllint,
# which libvirt's virt-xml-validate runs (only recommended by libvirt-clients).
APT_LIBVIRT := libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu libxml2-utils
# The team store's tests start a private PostgreSQL server from its binaries.
APT_POSTGRESQL := postgresql
# The HTML report's screenshot tests (headless Chromium) and the fonts they render with.
APT_CHROMIUM := chromium fonts-dejavu-core
# sshd for the remote libvirt URI and fleet --hosts tests.
APT_SSHD := openssh-server
# Only tests use these: fio's own example jobs (run as users have them), sysstat's
# iostat, which the disk monitor is checked against, zsh, which loads the generated
# completion and completes with it, and groff-base, whose groff renders the generated man page.
APT_TEST_TOOLS := fio-examples sysstat zsh groff-base
# The gridftp propagation method (seed 000's GSIFTP): the GridFTP server and its client,
# globus-url-copy. Outside the demo: only seeds/000-propagation.toml and its tests use it.
APT_GRIDFTP := globus-gridftp-server-progs globus-gass-copy-progs
# ATA over Ethernet storage (seed 001's EBS protocol): vblade, the target a lab host
# runs; the initiator is the guest's (the image carries aoe.ko and aoetools).
APT_AOE := vblade

APT_GROUPS := libvirt postgresql chromium sshd test-tools gridftp aoe
TEST_APT   := $(APT_GROUPS:%=$(STAMP)/apt-%)

.PHONY: all deps test-deps venv bytecode image lint unit integration test test-fast demo clean cli-docs

all: test

# $(call apt_install,PACKAGES): install those of PACKAGES that are not installed (apt-get
# update only when one is missing). Debian's lighttpd package starts a web server on port
# 80 when it is installed; hvbench only wants the program (it starts its own lighttpd per
# measurement). During the install a policy-rc.d (unless the host has one) forbids
# service starts, and when this install is what brought lighttpd in, its service is
# stopped and disabled afterwards.
define apt_install
	@mkdir -p $(STAMP)
	$(SUDO) sh -c '\
	  missing=; \
	  for p in $(1); do \
	    dpkg-query -W -f="\$${Status}" $$p 2>/dev/null | grep -q "ok installed" \
	      || missing="$$missing $$p"; \
	  done; \
	  [ -n "$$missing" ] || exit 0; \
	  echo "installing:$$missing"; \
	  apt-get update -q || exit $$?; \
	  had=$$(dpkg-query -W -f="\$${Status}" lighttpd 2>/dev/null | grep -c "ok installed"); \
	  guard=; \
	  if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d; \
	    chmod 755 /usr/sbin/policy-rc.d; guard=1; \
	  fi; \
	  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    $$missing; \
	  rc=$$?; \
	  [ -z "$$guard" ] || rm -f /usr/sbin/policy-rc.d; \
	  if [ "$$had" = 0 ] && [ -e /etc/init.d/lighttpd ]; then \
	    if [ -d /run/systemd/system ]; then systemctl disable --now lighttpd.service; \
	    else /etc/init.d/lighttpd stop >/dev/null 2>&1; update-rc.d lighttpd disable; fi; \
	  fi; \
	  exit $$rc'
	@touch $@
endef

$(STAMP)/apt: Makefile
	$(call apt_install,$(APT_DEMO))

$(STAMP)/apt-libvirt: Makefile
	$(call apt_install,$(APT_LIBVIRT))

$(STAMP)/apt-postgresql: Makefile
	$(call apt_install,$(APT_POSTGRESQL))

$(STAMP)/apt-chromium: Makefile
	$(call apt_install,$(APT_CHROMIUM))

$(STAMP)/apt-sshd: Makefile
	$(call apt_install,$(APT_SSHD))

$(STAMP)/apt-test-tools: Makefile
	$(call apt_install,$(APT_TEST_TOOLS))

$(STAMP)/apt-gridftp: Makefile
	$(call apt_install,$(APT_GRIDFTP))

$(STAMP)/apt-aoe: Makefile
	$(call apt_install,$(APT_AOE))

$(STAMP)/venv: pyproject.toml $(STAMP)/apt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

# The virtualenv with the dev extra (what `make deps` also makes).
venv: $(STAMP)/venv

deps: $(STAMP)/apt $(STAMP)/venv

# What the tests use beyond the demo (libvirt, PostgreSQL, Chromium, sshd, test tools,
# GridFTP, vblade).
test-deps: deps $(TEST_APT)

# The image is cached under ~/.cache/hvbench keyed by package versions; this is a no-op
# when nothing changed.
image: deps
	$(BIN)/hvbench image build

# hvbench's own modules compiled to bytecode. Python reads .pyc files even when it is
# told not to write them (PYTHONDONTWRITEBYTECODE=1, as on this machine), where each
# hvbench process, and the tests start hundreds, would compile its 228 modules from
# source again: `hvbench --help` took 0.8-1.2 s so, 0.46-0.54 s compiled. An
# up-to-date tree costs a fraction of a second; an edited module is compiled again.
bytecode: $(STAMP)/venv
	$(BIN)/python -m compileall -q src tests bench

lint: deps
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy --strict
	$(BIN)/lint-imports

# The unit suite runs on every core (pytest-xdist workers, each with its own private
# PostgreSQL); the integration suite one test at a time: its guests, labs and figures
# need the machine to themselves.
UNIT_JOBS ?= auto

unit: test-deps bytecode
	$(BIN)/pytest -q -n $(UNIT_JOBS) tests/unit

integration: image test-deps bytecode
	$(BIN)/pytest -q tests/integration

# The whole suite: the unit session, then the integration session (both run even when
# the first fails); each one's wall time is held to its budget in tests/budget.toml
# (tests/conftest.py fails a session over it by more than the tolerance, listing the
# slowest tests). Every test's time stays in build/test-times/ (JUnit XML), and what the
# integration tests waited on (boots, guest and host commands: HVBENCH_TRACE) in
# trace.jsonl: `python bench/suite_times.py` prints both per test file.
TIMES := build/test-times
test: image lint test-deps bytecode
	mkdir -p $(TIMES)
	$(BIN)/pytest -q -n $(UNIT_JOBS) --durations=20 --junitxml=$(TIMES)/unit.xml tests/unit; \
	unit=$$?; \
	rm -f $(TIMES)/trace.jsonl; \
	HVBENCH_TRACE=$(abspath $(TIMES))/trace.jsonl \
	$(BIN)/pytest -q --durations=20 --junitxml=$(TIMES)/integration.xml tests/integration; \
	integration=$$?; \
	[ $$unit -eq 0 ] && [ $$integration -eq 0 ]

# A developer's loop (at most 3 minutes): the unit suite, then one smoke integration
# test (a TCG guest boots and runs a command through the agent).
SMOKE := tests/integration/test_cli.py::test_guest_exec_passes_output_and_exit_code
test-fast: image test-deps bytecode
	$(BIN)/pytest -q -n $(UNIT_JOBS) tests/unit && $(BIN)/pytest -q $(SMOKE)

demo: image bytecode
	$(BIN)/hvbench doctor
	$(BIN)/hvbench guest exec -- uname -r
	$(BIN)/hvbench fio-compare --rw write --bs 64K --size 64M
	$(BIN)/hvbench run --db .make/demo.db

# Shell completion and the man page, generated from the parser (src/hvbench/cli/
# parser_docs.py): `source build/hvbench.bash`; build/_hvbench goes in a directory on
# zsh's $$fpath; `man -l build/hvbench.1`.
cli-docs: $(STAMP)/venv
	@mkdir -p build
	$(BIN)/python -m hvbench.cli.parser_docs bash > build/hvbench.bash
	$(BIN)/python -m hvbench.cli.parser_docs zsh > build/_hvbench
	$(BIN)/python -m hvbench.cli.parser_docs man > build/hvbench.1

clean:
	rm -rf $(VENV) $(STAMP) build .pytest_cache .mypy_cache .ruff_cache
