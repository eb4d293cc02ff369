# The two commands a newcomer needs, on a fresh Debian machine (as root, or with sudo):
#   make demo   set everything up, then trace a workload on the emulated phone storage stack and report it
#   make test   set everything up, then run the test suite
# Each set-up step is skipped quickly when already done.
#   make vphone        boot the virtual phone (Android 14 on Debian's 6.1 kernel, tests/support/vphone), print its serial
#   make vphone-down   stop it, leaving nothing behind

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

DEBIAN_PACKAGES := e2fsprogs xfsprogs btrfs-progs fuse3 libfuse3-dev pkg-config strace sqlite3 \
	libsqlite3-dev adb build-essential blktrace fio gcc-aarch64-linux-gnu chromium \
	trace-cmd gcc-arm-linux-gnueabihf qemu-user-static binfmt-support mksh toybox \
	qemu-system-x86 mmdebstrap erofs-utils f2fs-tools cpio kmod bindfs
PY_SOURCES := setup.cfg setup.py pyproject.toml $(shell find mobiperf collectors analyzers reports -name '*.py')

# The typed core: modules kept to ruff's format and checked by mypy (pyproject.toml says why not the whole tree yet).
TYPED_CORE := mobiperf/core/run_facts.py mobiperf/core/metrics.py mobiperf/core/mounts.py \
	mobiperf/core/trace_events.py mobiperf/core/vocabulary.py mobiperf/core/errors.py mobiperf/core/units.py \
	mobiperf/core/binaries.py mobiperf/core/version.py

.PHONY: demo test layers lint setup system-packages reference bench syscall-tables clean vphone vphone-down vphone-image

# The demo: SQLite inserts (Mobibench-compatible generator, TRUNCATE journal as on Android) on /sdcard, i.e. a
# legacy FUSE layer over an ext4 data partition, traced at the syscall (strace), FUSE, ext4/jbd2 and block layers.
demo: setup
	$(BIN)/mobiperf run -t local --stack ext4+fuse --source ftrace --source syscalls --source strace --source layout --source facts \
		-- mobibench -p . -d 0 -n 200 -j 1

test: setup layers lint
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# ruff's lint on the whole tree; its format check and mypy on the typed core.
lint: .stamps/venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check $(TYPED_CORE)
	$(BIN)/mypy --follow-imports=silent $(TYPED_CORE)

# The floors of docs/ARCHITECTURE.md, checked by import-linter (the contracts are in setup.cfg) on the package as it
# installs: build_py lays it out as pip would (collectors/ as mobiperf.collectors ...) in a scratch directory.
layers: .stamps/venv
	@tree=$$(mktemp -d) && trap 'rm -rf "$$tree"' EXIT && \
		$(BIN)/python setup.py -q build_py --build-lib "$$tree" >/dev/null 2>&1 && \
		cd "$$tree" && PYTHONPATH="$$tree" $(CURDIR)/$(BIN)/lint-imports $(CURDIR)/setup.cfg --no-cache

setup: .stamps/system-packages .stamps/venv .stamps/compiled reference

system-packages: .stamps/system-packages
.stamps/system-packages: Makefile
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

# The parsers' numba code compiled once here, not at a first parse (collectors/parse/compiled_code.py).
.stamps/compiled: .stamps/venv $(wildcard collectors/parse/*.py)
	$(BIN)/python -m mobiperf.collectors.parse.compiled_code -q
	@touch $@

# The host's build, and the static phone builds the Android-shaped test devices run: arm64-v8a (through
# qemu-user) and, on an x86_64 host, x86_64 (natively: the FUSE passthrough test).
reference: .stamps/system-packages
	$(MAKE) -s -C reference-impl
	$(MAKE) -s -C reference-impl ARCH=aarch64
	[ "$$(uname -m)" != x86_64 ] || $(MAKE) -s -C reference-impl ARCH=x86_64

# The virtual phone (tests/support/vphone): its image is built from Debian packages into ~/.cache/mobiperf/vphone
# (MOBIPERF_VPHONE_CACHE) the first time, then reused. VPHONE_KERNEL=6.12 boots Android 16's kernel instead,
# VPHONE_PORT=N chooses the host port (default: the first free one of MOBIPERF_VPHONE_PORTS, 5600-5699).
VPHONE := PYTHONPATH=tests/support $(BIN)/python -m vphone
VPHONE_KERNEL ?= 6.1

vphone: setup
	@$(VPHONE) up --kernel $(VPHONE_KERNEL) $(if $(VPHONE_PORT),--port $(VPHONE_PORT))

vphone-down: .stamps/venv
	@$(VPHONE) down $(if $(VPHONE_PORT),--port $(VPHONE_PORT))

# Build (or, with REBUILD=1, rebuild from a fresh Debian bootstrap) the virtual phone's image.
vphone-image: setup
	$(VPHONE) build --kernel $(VPHONE_KERNEL) $(if $(REBUILD),--rebuild)

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The system call numbers of each ABI (mobiperf/core/syscall_table.py) from the kernel headers of Debian's
# linux-libc-dev packages and cross compilers; tests/unit/test_syscall_table.py holds the table to them.
syscall-tables: setup
	$(BIN)/python -m tests.support.syscall_headers --write

clean:
	rm -rf .stamps $(VENV) build *.egg-info
	$(MAKE) -s -C reference-impl clean
