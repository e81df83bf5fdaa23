# hvbench: `make test` and `make demo` install everything they need (as root on Debian 12).
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
STAMP   := .make

# Host tools: QEMU and the workload programs (the native side runs them too), what
# `hvbench image build` needs to assemble the guest image from Debian packages, libvirt
# (its daemons, and the headers and compiler that build libvirt-python in the venv),
# sshd for the remote-URI and fleet --hosts tests, fio's own example jobs (run as users
# have them), PostgreSQL (the team store's tests start a private server from it) and
# xmllint, which libvirt's virt-xml-validate runs (only recommended by libvirt-clients).
APT_PACKAGES := qemu-system-x86 qemu-utils fio iperf3 httperf wrk stress-ng lighttpd chromium fonts-dejavu-core \
	busybox-static cpio kmod lz4 dpkg apt iproute2 sysstat python3-venv ca-certificates \
	squashfs-tools dropbear-bin openssh-client rsync curl zstd \
	libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu libvirt-dev pkg-config \
	gcc python3-dev openssh-server fio-examples postgresql libxml2-utils

.PHONY: all deps venv image lint unit integration test test-fast demo clean

all: test

# Debian's lighttpd package starts a web server on port 80 when it is installed; hvbench
# only wants the program (it starts its own lighttpd per measurement). During the
# install a policy-rc.d (unless the host has one) forbids service starts, and when this
# install is what brought lighttpd in, its service is stopped and disabled afterwards.
$(STAMP)/apt: Makefile
	@mkdir -p $(STAMP)
	$(SUDO) apt-get update -q
	$(SUDO) sh -c '\
	  had=$$(dpkg-query -W -f="\$${Status}" lighttpd 2>/dev/null | grep -c "ok installed"); \
	  guard=; \
	  if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d; \
	    chmod 755 /usr/sbin/policy-rc.d; guard=1; \
	  fi; \
	  env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    $(APT_PACKAGES); \
	  rc=$$?; \
	  [ -z "$$guard" ] || rm -f /usr/sbin/policy-rc.d; \
	  if [ "$$had" = 0 ] && [ -e /etc/init.d/lighttpd ]; then \
	    if [ -d /run/systemd/system ]; then systemctl disable --now lighttpd.service; \
	    else /etc/init.d/lighttpd stop >/dev/null 2>&1; update-rc.d lighttpd disable; fi; \
	  fi; \
	  exit $$rc'
	@touch $@

$(STAMP)/venv: pyproject.toml $(STAMP)/apt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

deps: $(STAMP)/apt $(STAMP)/venv

# The image is cached under ~/.cache/hvbench keyed by package versions; this is a no-op
# when nothing changed.
image: deps
	$(BIN)/hvbench image build

lint: deps
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy --strict
	$(BIN)/lint-imports

unit: deps
	$(BIN)/pytest -q tests/unit

integration: image
	$(BIN)/pytest -q tests/integration

# The whole suite; its wall time is held to tests/budget.toml (tests/conftest.py fails
# the session when it runs over by more than the tolerance, listing the slowest tests).
test: image lint
	$(BIN)/pytest -q --durations=20 tests/unit tests/integration

# A developer's loop (at most 3 minutes): the unit suite, then one smoke integration
# test (a TCG guest boots and runs a command through the agent).
SMOKE := tests/integration/test_cli.py::test_guest_exec_passes_output_and_exit_code
test-fast: image
	$(BIN)/pytest -q tests/unit $(SMOKE)

demo: image
	$(BIN)/hvbench doctor
	$(BIN)/hvbench guest exec -- uname -r
	$(BIN)/hvbench fio-compare --rw write --bs 64K --size 64M
	$(BIN)/hvbench run --db .make/demo.db

clean:
	rm -rf $(VENV) $(STAMP) .pytest_cache .mypy_cache .ruff_cache
