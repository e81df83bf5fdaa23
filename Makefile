# hvbench: `make test` and `make demo` install everything they need (as root on Debian 12).
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
STAMP   := .make

# Host tools: QEMU and the workload programs (the native side runs them too), and what
# `hvbench image build` needs to assemble the guest image from Debian packages.
APT_PACKAGES := qemu-system-x86 qemu-utils fio iperf3 httperf stress-ng \
	busybox-static cpio kmod lz4 dpkg apt iproute2 sysstat python3-venv ca-certificates \
	squashfs-tools

.PHONY: all deps venv image lint unit integration test demo clean

all: test

$(STAMP)/apt: Makefile
	@mkdir -p $(STAMP)
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(APT_PACKAGES)
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

unit: deps
	$(BIN)/pytest -q tests/unit

integration: image
	$(BIN)/pytest -q tests/integration

test: image lint
	$(BIN)/pytest -q tests/unit tests/integration

demo: image
	$(BIN)/hvbench doctor
	$(BIN)/hvbench guest exec -- uname -r
	$(BIN)/hvbench fio-compare --rw write --bs 64K --size 64M
	$(BIN)/hvbench run --db .make/demo.db

clean:
	rm -rf $(VENV) $(STAMP) .pytest_cache .mypy_cache .ruff_cache
