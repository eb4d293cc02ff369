# The two commands a newcomer needs, on a fresh Debian machine (as root, or with sudo):
#   make demo   set everything up, then trace a workload on the emulated phone storage stack and report it
#   make test   set everything up, then run the test suite
# Each set-up step is skipped quickly when already done.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

DEBIAN_PACKAGES := e2fsprogs xfsprogs btrfs-progs fuse3 libfuse3-dev pkg-config strace sqlite3 \
	libsqlite3-dev adb build-essential blktrace fio gcc-aarch64-linux-gnu chromium \
	trace-cmd gcc-arm-linux-gnueabihf qemu-user-static binfmt-support mksh toybox f2fs-tools
PY_SOURCES := setup.cfg setup.py pyproject.toml $(shell find mobiperf collectors analyzers reports -name '*.py')

.PHONY: demo test layers setup system-packages reference bench clean

# The demo: SQLite inserts (Mobibench-compatible generator, TRUNCATE journal as on Android) on /sdcard, i.e. a
# legacy FUSE layer over an ext4 data partition, traced at the syscall (strace), FUSE, ext4/jbd2 and block layers.
demo: setup
	$(BIN)/mobiperf run -t local --stack ext4+fuse --source ftrace --source syscalls --source strace --source layout --source facts \
		-- mobibench -p . -d 0 -n 200 -j 1

test: setup layers
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# The floors of docs/ARCHITECTURE.md, checked by import-linter (the contracts are in setup.cfg) on the package as it
# installs: build_py lays it out as pip would (collectors/ as mobiperf.collectors ...) in a scratch directory.
layers: .stamps/venv
	@tree=$$(mktemp -d) && trap 'rm -rf "$$tree"' EXIT && \
		$(BIN)/python setup.py -q build_py --build-lib "$$tree" >/dev/null 2>&1 && \
		cd "$$tree" && PYTHONPATH="$$tree" $(CURDIR)/$(BIN)/lint-imports $(CURDIR)/setup.cfg --no-cache

setup: .stamps/system-packages .stamps/venv reference

system-packages: .stamps/system-packages
.stamps/system-packages:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@mkdir -p .stamps && touch $@

.stamps/venv: $(PY_SOURCES) .stamps/system-packages
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@mkdir -p .stamps && touch $@

# The host's build, and the static phone builds the Android-shaped test devices run: arm64-v8a (through
# qemu-user) and, on an x86_64 host, x86_64 (natively: the FUSE passthrough test).
reference: .stamps/system-packages
	$(MAKE) -s -C reference-impl
	$(MAKE) -s -C reference-impl ARCH=aarch64
	[ "$$(uname -m)" != x86_64 ] || $(MAKE) -s -C reference-impl ARCH=x86_64

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf .stamps $(VENV) build *.egg-info
	$(MAKE) -s -C reference-impl clean
