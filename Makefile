# plateau: thin wrapper around meson. Installs missing Debian packages, configures, builds, runs.
#   make demo   run the main job on the built-in demo (DEMO_ARGS="--leak graph" for a leaking run)
#   make test   every test: main build, ASan+UBSan unit tests, the allocator at its highest check level,
#               CUDA-disabled build, bounded fuzzers, PyPI's torch 2 (test-torch2), the wheel (test-wheel)
#   make wheel  the plateau-profiler wheel (pip install build/wheel/dist/*.whl; docs/install.md)
SHELL := /bin/bash
BUILD ?= build
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MESON_FLAGS ?=
FUZZ_SECONDS ?= 20
EXPENSIVE_FUZZ_SECONDS ?= 10

# Debian packages, in two lists. BUILD_PKGS: what `make build` and `make demo` need (the default configuration
# builds the cmocka tests too; python3 renders the man pages). TEST_PKGS: what `make test` adds (a fresh CI machine
# gets both: .ci/run calls make test).
# clang, libclang-rt-14-dev: the fuzz and the expensive-check builds. g++: the C++ test targets.
# chromium, fonts-liberation: the HTML report's browser tests. python3-torch: Debian's torch 1.13 for the Python tests.
# cmake, groff-base: the install test builds a trainer with CMake's find_package(plateau) and renders the man pages.
# python3-venv: the venv of pinned transformers / Lightning / accelerate over Debian's torch (make framework-venv), the
# venv of PyPI's torch 2 (make torch2-venv), and the wheel's (make wheel, and the fresh venv its test installs into).
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user: the preload's aarch64 dlsym trampoline is cross-built and
# run under qemu (preload.dlsym_trampoline_aarch64).
BUILD_PKGS := meson ninja-build pkg-config gcc python3 libcmocka-dev libjemalloc-dev
TEST_PKGS := g++ clang libclang-rt-14-dev \
        chromium fonts-liberation python3-torch \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
        cmake groff-base python3-venv
# make wheel: a venv (python3-venv) and a native build (as BUILD_PKGS); the tools come from PyPI (tools/wheel.sh).
WHEEL_PKGS := $(BUILD_PKGS) python3-venv

.PHONY: all deps deps-test deps-wheel build demo wheel sdist framework-venv integrations-venv torch2-venv test test-main \
        test-torch2 test-wheel test-repeat test-asan test-expensive test-nocuda test-fuzz bench gpu-check gpu-bundle clean

all: build

# deps: install what is missing of PKGS (deps-test, deps-wheel: of the longer lists)
PKGS ?= $(BUILD_PKGS)
deps:
	@missing=$$(for p in $(PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing packages:" $$missing; \
	  $(SUDO) apt-get install -y --no-install-recommends $$missing >/dev/null || \
	  { $(SUDO) apt-get update >/dev/null && $(SUDO) apt-get install -y --no-install-recommends $$missing >/dev/null; }; \
	fi

deps-test:
	@$(MAKE) --no-print-directory deps PKGS="$(BUILD_PKGS) $(TEST_PKGS)"

deps-wheel:
	@$(MAKE) --no-print-directory deps PKGS="$(WHEEL_PKGS)"

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) $(MESON_FLAGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	./tools/demo.sh $(BUILD) $(DEMO_ARGS)

test: deps-test
	@rm -f .test-status; \
	$(MAKE) --no-print-directory test-main   || echo main   >> .test-status; \
	$(MAKE) --no-print-directory test-asan   || echo asan   >> .test-status; \
	$(MAKE) --no-print-directory test-expensive || echo expensive >> .test-status; \
	$(MAKE) --no-print-directory test-nocuda || echo nocuda >> .test-status; \
	$(MAKE) --no-print-directory test-fuzz   || echo fuzz   >> .test-status; \
	$(MAKE) --no-print-directory test-torch2 || echo torch2 >> .test-status; \
	$(MAKE) --no-print-directory test-wheel  || echo wheel  >> .test-status; \
	python3 tools/test-summary.py $(BUILD) build-asan build-expensive build-nocuda build-fuzz; rc=$$?; \
	if [ -s .test-status ]; then echo "failed stages: $$(tr '\n' ' ' < .test-status)"; rm -f .test-status; exit 1; fi; \
	exit $$rc

# python.callbacks_real, .lightning_real, .accelerate_real: real transformers / Lightning / accelerate, pinned in
# tests/python/frameworks.txt, pip-installed once into a venv over Debian's torch 1.13 (~21 MB of wheels). Without
# network the venv is not made and those tests skip with the reason; the tests find it in the build dir themselves.
framework-venv: build deps-test
	tests/python/framework-venv.sh $(BUILD)/frameworks-venv

# python.pytest_*, .prometheus, .loggers: pytest (plateau's plugin), pytest-memray (bench/pytest_plugins.sh),
# prometheus_client's parser, tensorboard and wandb (offline), tests/python/integrations.txt, in a venv over Debian's
# torch 1.13 (~250 MB installed). Without network the venv is not made and those tests skip with the reason.
integrations-venv: build
	tests/python/integrations-venv.sh $(BUILD)/integrations-venv

test-main: build deps-test framework-venv integrations-venv
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 --no-suite repeat --no-suite torch2 --no-suite wheel

# torch2.*: PyPI's torch 2.15 for the CPU (tests/python/torch2.txt: every wheel pinned, its CUDA libraries included,
# with transformers and Lightning 2; ~2.85 GB of wheels kept in $(BUILD)/torch2-wheels, 5.6 GB installed) in
# $(BUILD)/torch2-venv over Debian's python3.
# A second run downloads nothing; without network the venv is not made and the tests skip with the reason. Its log is
# meson-logs/testlog-torch2.* (test-main's testlog.* stays; tools/test-summary.py counts both).
torch2-venv: build deps-test
	tests/python/torch2-venv.sh $(BUILD)/torch2-venv $(BUILD)/torch2-wheels

test-torch2: build torch2-venv
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 --suite torch2 --logbase testlog-torch2

# The repeated runs of issue 17's PyTorch script (10 x 4 variants, ~40 min): not in `make test`.
test-repeat: build
	meson test -C $(BUILD) --print-errorlogs --suite repeat

# debug_level=1: PL_ASSERT on (allocator/debug.h). Level 2 runs pl_alloc_check after every allocator operation, so
# each event a tune test replays costs a whole-heap walk: the unit suite took 293 s instead of 85 s, with
# tune.golden (3.6 s -> 216 s), tune.replay_determinism and tune.replay_paths past their timeouts. The stress tests
# call pl_alloc_check after every operation themselves; test-expensive runs level 2 on the allocator alone.
test-asan: deps-test
	[ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
	  -Dbench=false -Ddebug_level=1
	ninja -C build-asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  meson test -C build-asan --suite unit --print-errorlogs --num-processes 2

# debug_level=2 for the allocator alone: pl_alloc_check (every structure and counter) after every malloc, free and
# empty_cache, under ASan+UBSan, on its unit tests (suite 'allocator') and its two fuzz targets for
# EXPENSIVE_FUZZ_SECONDS each (the config parser; the fast replay against the locked one). Only the allocator-check
# alias (tests/meson.build) is built, not the tree: from a clean build-expensive the stage took 66 and 85 s on the
# shared 2-core dev machine (setup, 77 build steps, 16 tests).
test-expensive: deps-test
	[ -f build-expensive/build.ninja ] || CC=clang meson setup build-expensive -Db_sanitize=address,undefined \
	  -Db_lundef=false -Dbench=false -Dfuzz=true -Ddebug_level=2
	ninja -C build-expensive allocator-check
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  PL_FUZZ_SECONDS=$(EXPENSIVE_FUZZ_SECONDS) \
	  meson test -C build-expensive --no-rebuild --suite allocator --print-errorlogs --num-processes 2

test-nocuda: deps-test
	[ -f build-nocuda/build.ninja ] || meson setup build-nocuda -Dcuda=disabled -Dcupti=disabled -Dbench=false
	ninja -C build-nocuda
	meson test -C build-nocuda --suite unit --print-errorlogs --num-processes 2

test-fuzz: deps-test
	[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true -Dbench=false -Dtests=true \
	  -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C build-fuzz
	PL_FUZZ_SECONDS=$(FUZZ_SECONDS) meson test -C build-fuzz --suite fuzz --print-errorlogs --num-processes 2

# The GPU check (docs/gpu-check.md): six steps, one table. On a machine with a GPU it runs on the real driver, CUDA
# runtime, CUPTI and torch; without one, over the CUDA driver double (GPU-only steps SKIP with the reason).
# GPU_CHECK_ARGS, e.g. "--out DIR --steps 1,3". gpu-bundle: the relocatable bundle a bare GPU machine runs it from.
gpu-check: build
	tools/gpu-check.sh --tree $(BUILD) $(GPU_CHECK_ARGS)

gpu-bundle: build
	tools/gpu-check.sh --tree $(BUILD) --pack gpu-bundle

# make wheel: the plateau-profiler wheel in $(BUILD)/wheel/dist (tools/wheel.sh, docs/install.md): meson-python and
# the other pinned tools of tools/wheel-tools.txt from PyPI in $(BUILD)/wheel-venv (once), an incremental build in
# $(BUILD)/wheel/build, auditwheel's manylinux tag. Independent of $(BUILD)'s own configuration.
wheel: deps-wheel
	tools/wheel.sh $(BUILD)

# make sdist: $(BUILD)/wheel/sdist/plateau_profiler-<version>.tar.gz, the committed tree (meson dist), which pip builds
# into a wheel where a compiler and the -dev packages exist (docs/install.md)
sdist: deps-wheel
	tools/wheel.sh $(BUILD) --sdist

# wheel.*: the wheel installed into a fresh venv and run (tests/install/test_wheel.sh). Without network the tools are
# not installed, $(BUILD)/wheel.failed says why and the test skips with that reason; a build that fails still fails.
test-wheel: build deps-test
	tools/wheel.sh $(BUILD) --lenient
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 --suite wheel --logbase testlog-wheel

bench: build
	meson test -C $(BUILD) --benchmark --verbose

clean:
	rm -rf $(BUILD) build-asan build-expensive build-nocuda build-fuzz
