# strata — build, test and demo.
#
#   make            build the CLI and one agent module per Python found
#   make check      install test dependencies, build, run every test (the
#                   fuzz targets too, a few seconds each: tests/fuzz/fuzz.mk)
#   make demo       install, build, profile examples/demo.py, print the report
#   make cpython-tests   CPython's own regression tests (threads, signals, fork,
#                   subprocess, select, os, queue) under strata record on every
#                   interpreter, compared with the same tests without strata
#   make PYTHONS="/usr/bin/python3 /opt/py/bin/python3.12"   choose interpreters
#   make check-versions   every CPython 3.8-3.15 present, checked (docs/versions.md)
#   make check-sid        CPython 3.14 and 3.15 in a Debian sid root (scripts/sidroot.sh):
#                         build-sid/, the functional suite and CPython's own tests under both
#   make wheel            the one wheel (dist/strata_profiler-*-py3-none-manylinux_*.whl):
#                         CLI, agent, helper, a module per CPython 3.8-3.15 (docs/install.md)
#   make check-wheel      that wheel installed and used in a fresh venv of every Python
#                         here and in minimal Debian 12 and 13 roots (tests/wheel/matrix.py)
#
# Layout of the build: build/bin/strata, build/lib/strata/libstrata-agent.so
# and build/lib/strata/strata-py-X.Y.Z.so (found by the CLI relative to
# itself, so the build tree and an installed tree work the same way).

.DEFAULT_GOAL := all
BUILD    ?= build
PREFIX   ?= /usr/local
CC       ?= cc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
WARN      = -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers
CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Isrc
BASECFLAGS = -std=gnu11 $(WARN) $(CPPFLAGS) $(CFLAGS)
STRATA_VERSION := 0.1.0

# Minor versions the per-version agent module has accessors for.
SUPPORTED_MINORS ?= 3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.15
PYTHONS ?=

BIN      = $(BUILD)/bin
LIBDIR   = $(BUILD)/lib/strata
OBJ      = $(BUILD)/obj

# Each program is built from its folders (docs/hacking.md has the map):
#   src/common, src/lib, src/export, src/cli (and its family folders)  the CLI
#   src/agent + src/shm   libstrata-agent.so, loaded into the profiled process
#   src/agentd + src/shm  strata-agentd, the agent's helper process
#   src/py                one module per CPython version (strata-py-X.Y.Z.so
#                         beside the agent, strata-pyreader-X.Y.Z.so for the CLI)
COMMON_SRC = $(wildcard src/common/*.c)
LIB_SRC    = $(wildcard src/lib/*.c)
EXPORT_SRC = $(wildcard src/export/*.c)
CLI_SRC    = $(wildcard src/cli/*.c src/cli/*/*.c)
SHM_SRC    = $(wildcard src/shm/*.c)
AGENT_SRC  = $(wildcard src/agent/*.c) $(SHM_SRC)
AGENTD_SRC = $(wildcard src/agentd/*.c) $(SHM_SRC)

CLI_LIBS   = -lzstd -lm
# --native symbolization: elfutils, and libstdc++'s demangler.
CLI_LIBS  += -ldw -lelf -lstdc++ -ldl
# -f pprof writes gzip (zlib).
CLI_LIBS  += -lz
# annotate --asm: JIT machine code disassembled with capstone.
CLI_LIBS  += -lcapstone
# strata top's full-screen view.
CLI_LIBS  += -lncursesw -ltinfo
# Continuous profiling's sender (strata send) posts OTLP with the system's
# libcurl, loaded when it starts (src/cli/send/http.c says why): its header
# only, here.
# The agent links nothing beyond the C library: it is loaded into every
# program profiled, where a library of ours (in the wheel, a vendored copy
# under another name) would sit in the program's global symbol scope ahead
# of the program's own copy of it. Its objects are built with a section per
# function so that the link drops what it does not call (format.c's zstd
# compression is the helper's), and make wheel checks that it stays so.
AGENT_LIBS = -ldl -lpthread -lrt -lm
AGENT_LDFLAGS = -Wl,--gc-sections -Wl,--as-needed
# The helper compresses the stream (zstd). It derives unwind rules for JIT
# code without CFI with capstone, which it loads with dlopen when it needs it
# (src/agentd/cfi-synth.c), through libstrata-capstone.so beside it.
AGENTD_LIBS = -lzstd $(AGENT_LIBS)

CLI_OBJ   = $(patsubst src/%.c,$(OBJ)/cli/%.o,$(COMMON_SRC) $(LIB_SRC) $(EXPORT_SRC) $(CLI_SRC))
AGENT_OBJ = $(patsubst src/%.c,$(OBJ)/agent/%.o,$(AGENT_SRC) $(COMMON_SRC))
# The helper's objects are its own: built with STRATA_AGENTD, where the
# region's state is per thread (each thread works for one target).
AGENTD_OBJ = $(patsubst src/%.c,$(OBJ)/agentd/%.o,$(AGENTD_SRC) $(COMMON_SRC))

# One agent module per interpreter: the fragment lists versions and headers.
# It is remade when the script or the PYTHONS choice changes (the stamp holds
# the last choice), so `make PYTHONS=...` always builds what it names.
# It is also remade when pyenv gains or loses an interpreter (the versions
# directory changes), so the check below compares with what is there now.
PYTHONS_STAMP = $(BUILD)/pythons.choice
$(shell mkdir -p $(BUILD) && (echo '$(PYTHONS)' | cmp -s - $(PYTHONS_STAMP) || echo '$(PYTHONS)' > $(PYTHONS_STAMP)))
PYENV_VERSIONS := $(if $(PYTHONS),,$(wildcard $(shell pyenv root 2>/dev/null || echo "$${PYENV_ROOT:-$$HOME/.pyenv}")/versions))
$(BUILD)/pythons.mk: scripts/pythons.sh $(PYTHONS_STAMP) $(PYENV_VERSIONS)
	@mkdir -p $(BUILD)
	@scripts/pythons.sh $(PYTHONS) > $@.tmp && mv $@.tmp $@
-include $(BUILD)/pythons.mk
# Found and supported; of those, the ones with internal headers are built.
PY_SUPPORTED = $(foreach v,$(PY_VERSIONS),$(if $(filter $(PY_MINOR_$(v)),$(SUPPORTED_MINORS)),$(v)))
PY_BUILDS = $(foreach v,$(PY_SUPPORTED),$(if $(PY_INC_$(v)),$(v)))
PY_UNBUILT = $(filter-out $(PY_BUILDS),$(PY_SUPPORTED))
PY_OTHER = $(filter-out $(PY_SUPPORTED),$(PY_VERSIONS))
PY_MODULES = $(foreach v,$(PY_BUILDS),$(LIBDIR)/strata-py-$(v).so $(LIBDIR)/strata-pyreader-$(v).so)
$(if $(PY_OTHER),$(info strata: not building for Python $(PY_OTHER): supported are $(SUPPORTED_MINORS)))
$(foreach v,$(PY_UNBUILT),\
	$(info strata: cannot build the agent for Python $(v) ($(PY_EXE_$(v))): no internal headers under $(PY_NOHEADERS_$(v))))
$(foreach p,$(PY_BROKEN),$(info strata: cannot build the agent for $(p): it does not run))

.PHONY: all clean check demo test unit asan func fuzz fuzz-check deps install bench check-versions check-pythons check-sid sid-or-skip cpython-tests ubsan-func \
	wheel check-wheel
# The Python package (python -m strata, strata.profile) sits next to the
# agent: PYTHONPATH=<prefix>/lib/strata/python.
PYPKG_SRC = $(wildcard python/strata/*.py)
PYPKG     = $(patsubst python/%,$(LIBDIR)/python/%,$(PYPKG_SRC))
all: $(BIN)/strata $(LIBDIR)/libstrata-agent.so $(LIBDIR)/strata-agentd $(LIBDIR)/libstrata-capstone.so \
	$(PY_MODULES) $(PYPKG)

$(LIBDIR)/python/strata/%.py: python/strata/%.py
	@mkdir -p $(dir $@)
	cp $< $@

$(OBJ)/cli/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -MMD -MP -DSTRATA_VERSION='"$(STRATA_VERSION)"' -c $< -o $@

$(OBJ)/agent/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -MMD -MP -DSTRATA_VERSION='"$(STRATA_VERSION)"' -fPIC -fvisibility=hidden -ftls-model=initial-exec \
		-ffunction-sections -fdata-sections -c $< -o $@

$(OBJ)/agentd/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -MMD -MP -DSTRATA_VERSION='"$(STRATA_VERSION)"' -DSTRATA_AGENTD -fPIC -fvisibility=hidden \
		-ffunction-sections -fdata-sections -c $< -o $@

$(BIN)/strata: $(CLI_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(SAN_EXTRA) $(CLI_LIBS)

$(LIBDIR)/libstrata-agent.so: $(AGENT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,-z,defs -Wl,-z,nodelete -Wl,-z,now $(AGENT_LDFLAGS) -o $@ $^ $(SAN_EXTRA) $(AGENT_LIBS)

$(LIBDIR)/strata-agentd: $(AGENTD_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pie -o $@ $^ $(SAN_EXTRA) $(AGENTD_LIBS)

# Nothing but a dependency on capstone: the helper dlopens it and finds
# capstone's functions through it (src/agentd/cfi-synth.c says why).
$(LIBDIR)/libstrata-capstone.so:
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ -x c /dev/null -x none -Wl,--no-as-needed -lcapstone

# The module resolves CPython's symbols from the process it is loaded into.
PYMOD_SRC = $(wildcard src/py/*.c)
PYMOD_DEP = $(PYMOD_SRC) $(wildcard src/py/*.h) src/common/format.h
$(LIBDIR)/strata-py-%.so: $(PYMOD_DEP)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-shadow $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden \
		-I$(PY_INC_$*) $(PY_CFLAGS_$*) -shared -o $@ $(PYMOD_SRC)

# The same source as a reader of another process's interpreter (pyapi.h):
# -z defs proves it refers to no symbol of CPython, so it loads anywhere.
$(LIBDIR)/strata-pyreader-%.so: $(PYMOD_DEP)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-shadow $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -DSTRATA_REMOTE \
		-I$(PY_INC_$*) $(PY_CFLAGS_$*) -shared -Wl,-z,defs -o $@ $(PYMOD_SRC) -lpthread

-include $(CLI_OBJ:.o=.d) $(AGENT_OBJ:.o=.d) $(AGENTD_OBJ:.o=.d)

# html.c and heatmap.c embed their pages with .incbin, which -MMD cannot see.
$(OBJ)/cli/export/html.o $(BUILD)/asan/obj/export/html.o: src/export/flame.html src/export/flame.js
$(OBJ)/cli/export/heatmap.o $(BUILD)/asan/obj/export/heatmap.o: src/export/heatmap.html src/export/heatmap.js

# ---- tests ----------------------------------------------------------------

include tests/unit/unit.mk
include tests/san/san.mk

deps:
	scripts/deps.sh

# Builds and the fuzz runs use every core (the tests themselves stay
# serial within `unit` and `asan`; -k: every fuzz target runs even after
# one fails).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check: deps
	$(MAKE) -j$(JOBS) all
	$(MAKE) -j$(JOBS) unit
	$(MAKE) -j$(JOBS) asan
	$(MAKE) -k -j$(JOBS) --output-sync=target fuzz-check
	@# The sid root (made, or updated) and strata built in it while the
	@# host's functional suite runs, at a lower priority: downloads and a
	@# compile, off the busy stage after it, where every core is taken.
	@# Its output: $(BUILD)/sid-prepare.log; a failure there is met again,
	@# and said, by sid-or-skip. check-wheel builds from the root's headers
	@# and runs in it: made once, here, neither waits for the other.
	@mkdir -p $(BUILD); \
	nice -n 10 scripts/sidroot.sh prepare >$(BUILD)/sid-prepare.log 2>&1 & prep=$$!; \
	$(MAKE) func; rc=$$?; \
	wait $$prep; \
	exit $$rc
	$(MAKE) -j3 --output-sync=target cpython-tests sid-or-skip check-wheel ubsan-func

func: all check-pythons
	scripts/run-func-tests.sh

# Every interpreter found has its agent module, or `make check` fails: the
# functional suite cannot test a Python it has no agent for, and a skip
# would hide that. Versions outside SUPPORTED_MINORS are reported only.
check-pythons: all
	@fail=0; \
	$(foreach v,$(PY_BUILDS),[ -f $(LIBDIR)/strata-py-$(v).so ] && [ -f $(LIBDIR)/strata-pyreader-$(v).so ] || \
		{ echo "strata: Python $(v): $(LIBDIR)/strata-py-$(v).so or strata-pyreader-$(v).so was not built" >&2; fail=1; };) \
	$(foreach v,$(PY_UNBUILT),echo "strata: Python $(v) ($(PY_EXE_$(v))) is installed but has no agent build:" \
		"no internal headers (internal/pycore_*.h) under $(PY_NOHEADERS_$(v)); install them, or leave it out with PYTHONS=" >&2; fail=1;) \
	$(foreach p,$(PY_BROKEN),echo "strata: $(p) does not run, so it has no agent build:" \
		"repair or remove it, or leave it out with PYTHONS=" >&2; fail=1;) \
	$(foreach v,$(PY_OTHER),echo "strata: Python $(v) ($(PY_EXE_$(v))): not supported (supported are $(SUPPORTED_MINORS)), not tested";) \
	[ $$fail -eq 0 ] && echo "strata: agent modules for every supported Python found: $(PY_BUILDS)"

# Every CPython 3.8-3.15 present, against the interpreters' own answers
# (docs/versions.md); an absent version is reported as skipped.
check-versions: all
	tests/versions/check_versions.py

# CPython 3.14 and 3.15 from Debian sid/experimental, in a cached root
# (scripts/sidroot.sh): builds build-sid/ there and runs the functional
# suite under both (SID_TESTS, below: what make check runs there). Exit
# status 77, after one line saying why, where no root can be had (no
# archive, no root privileges).
check-sid:
	scripts/sidroot.sh check $(SID_TESTS)
	scripts/sidroot.sh regrtests

# make check runs these two side by side (both mostly wait: regrtest's
# timeouts, the root's processes), with check-wheel, each one's output
# printed whole when it ends. What check-sid runs, and make check with it: the tests run once per interpreter (debian-3.14,
# debian-3.15), then CPython's own regression tests under strata on both
# (cpu mode: `scripts/sidroot.sh regrtests`); a machine that cannot have
# the root (no archive, not root) is a skip, said in one line by sidroot.sh. --native and Numba run
# there too (Debian's stripped python3.14 and llvmlite: docs/versions.md).
# The export consumers (go, node) are not installed in the root; the
# exports do not depend on the interpreter and are tested on the host
# (test_exports_of_a_native_profile ends with go's pprof for Debian's Python).
SID_TESTS = tests/func -k "debian-3.14 or debian-3.15" \
	--ignore=tests/func/test_export_text.py --ignore=tests/func/test_export_web.py \
	--deselect=tests/func/test_native.py::test_exports_of_a_native_profile
sid-or-skip:
	@scripts/sidroot.sh check $(SID_TESTS); rc=$$?; \
	if [ $$rc -eq 77 ]; then echo "strata: CPython 3.14/3.15 not tested (see the line above)"; exit 0; fi; \
	scripts/sidroot.sh regrtests; rc2=$$?; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$rc2

# Programs behave as without the profiler (issue 11): CPython's own tests,
# cpu mode and a smaller set in wall and --native modes, every interpreter
# present; tests/cpython/run_regrtests.py says what runs and why.
cpython-tests: all
	tests/cpython/run_regrtests.py

# The wheel: pip wheel over build-aux/strata_build.py, objects in
# build/wheel/, output in dist/ (docs/install.md).
wheel:
	scripts/wheel.sh

# make check builds it once (what this machine has: --partial) and tests it
# everywhere it should install (tests/wheel/matrix.py says where).
check-wheel:
	scripts/wheel.sh --partial
	tests/wheel/matrix.py

demo:
	scripts/deps.sh demo
	$(MAKE) all
	$(BIN)/strata record --jit-lines -o $(BUILD)/demo.strata -- /usr/bin/python3 examples/demo.py
	$(BIN)/strata report $(BUILD)/demo.strata

bench: all
	bench/overhead.py

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/strata
	install -m 755 $(BIN)/strata $(DESTDIR)$(PREFIX)/bin/strata
	install -m 755 $(LIBDIR)/*.so $(LIBDIR)/strata-agentd $(DESTDIR)$(PREFIX)/lib/strata/
	install -d $(DESTDIR)$(PREFIX)/lib/strata/python/strata
	install -m 644 $(PYPKG) $(DESTDIR)$(PREFIX)/lib/strata/python/strata/

clean:
	rm -rf $(BUILD)
