# strata — build, test and demo.
#
#   make            build the CLI and one agent module per Python found
#   make check      install test dependencies, build, run every test
#   make demo       install, build, profile examples/demo.py, print the report
#   make PYTHONS="/usr/bin/python3 /opt/py/bin/python3.12"   choose interpreters
#   make check-versions   every CPython 3.8-3.15 present, checked (docs/versions.md)
#   make check-sid        CPython 3.14 and 3.15 in a Debian sid root (scripts/sidroot.sh):
#                         build-sid/ and the functional suite under both
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
CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64
BASECFLAGS = -std=gnu11 $(WARN) $(CPPFLAGS) $(CFLAGS)
STRATA_VERSION := 0.1.0

# Minor versions the per-version agent module has accessors for.
SUPPORTED_MINORS ?= 3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.15
PYTHONS ?=

BIN      = $(BUILD)/bin
LIBDIR   = $(BUILD)/lib/strata
OBJ      = $(BUILD)/obj

COMMON_SRC = $(wildcard src/common/*.c)
LIB_SRC    = $(wildcard src/lib/*.c)
EXPORT_SRC = $(wildcard src/export/*.c)
CLI_SRC    = $(wildcard src/cli/*.c)
AGENT_SRC  = $(wildcard src/agent/*.c)

CLI_LIBS   = -lzstd -lm
# --native symbolization: elfutils, and libstdc++'s demangler.
CLI_LIBS  += -ldw -lelf -lstdc++
# -f pprof writes gzip (zlib).
CLI_LIBS  += -lz
# annotate --asm: JIT machine code disassembled with capstone.
CLI_LIBS  += -lcapstone
# strata top's full-screen view.
CLI_LIBS  += -lncursesw -ltinfo
AGENT_LIBS = -lzstd -ldl -lpthread -lrt

CLI_OBJ   = $(patsubst src/%.c,$(OBJ)/cli/%.o,$(COMMON_SRC) $(LIB_SRC) $(EXPORT_SRC) $(CLI_SRC))
AGENT_OBJ = $(patsubst src/%.c,$(OBJ)/agent/%.o,$(AGENT_SRC) $(COMMON_SRC))

# One agent module per interpreter: the fragment lists versions and headers.
# It is remade when the script or the PYTHONS choice changes (the stamp holds
# the last choice), so `make PYTHONS=...` always builds what it names.
PYTHONS_STAMP = $(BUILD)/pythons.choice
$(shell mkdir -p $(BUILD) && (echo '$(PYTHONS)' | cmp -s - $(PYTHONS_STAMP) || echo '$(PYTHONS)' > $(PYTHONS_STAMP)))
$(BUILD)/pythons.mk: scripts/pythons.sh $(PYTHONS_STAMP)
	@mkdir -p $(BUILD)
	@scripts/pythons.sh $(PYTHONS) > $@.tmp && mv $@.tmp $@
-include $(BUILD)/pythons.mk
PY_BUILDS = $(foreach v,$(PY_VERSIONS),$(if $(filter $(PY_MINOR_$(v)),$(SUPPORTED_MINORS)),$(v)))
PY_MODULES = $(foreach v,$(PY_BUILDS),$(LIBDIR)/strata-py-$(v).so)
$(foreach v,$(filter-out $(PY_BUILDS),$(PY_VERSIONS)),\
	$(info strata: skipping Python $(v) ($(PY_EXE_$(v))): supported are $(SUPPORTED_MINORS)))

.PHONY: all clean check demo test unit asan func fuzz deps install bench check-versions check-sid
# The Python package (python -m strata, strata.profile) sits next to the
# agent: PYTHONPATH=<prefix>/lib/strata/python.
PYPKG_SRC = $(wildcard python/strata/*.py)
PYPKG     = $(patsubst python/%,$(LIBDIR)/python/%,$(PYPKG_SRC))
all: $(BIN)/strata $(LIBDIR)/libstrata-agent.so $(PY_MODULES) $(PYPKG)

$(LIBDIR)/python/strata/%.py: python/strata/%.py
	@mkdir -p $(dir $@)
	cp $< $@

$(OBJ)/cli/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -MMD -MP -DSTRATA_VERSION='"$(STRATA_VERSION)"' -c $< -o $@

$(OBJ)/agent/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -MMD -MP -DSTRATA_VERSION='"$(STRATA_VERSION)"' -fPIC -fvisibility=hidden -ftls-model=initial-exec -c $< -o $@

$(BIN)/strata: $(CLI_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(CLI_LIBS)

$(LIBDIR)/libstrata-agent.so: $(AGENT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,-z,defs -Wl,-z,nodelete -o $@ $^ $(AGENT_LIBS)

# The module resolves CPython's symbols from the process it is loaded into.
PYMOD_SRC = src/agent/py/pyframes.c src/agent/py/srcqual.c
$(LIBDIR)/strata-py-%.so: $(PYMOD_SRC) src/agent/py/srcqual.h src/agent/pyapi.h src/common/format.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -Wno-shadow $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden \
		-I$(PY_INC_$*) -shared -o $@ $(PYMOD_SRC)

-include $(CLI_OBJ:.o=.d) $(AGENT_OBJ:.o=.d)

# html.c embeds the flame graph page with .incbin, which -MMD cannot see.
$(OBJ)/cli/export/html.o $(BUILD)/asan/obj/export/html.o: src/export/flame.html src/export/flame.js

# ---- tests ----------------------------------------------------------------

include tests/unit/unit.mk

deps:
	scripts/deps.sh

check: deps
	$(MAKE) all
	$(MAKE) unit
	$(MAKE) asan
	$(MAKE) func

func: all
	scripts/run-func-tests.sh

# Every CPython 3.8-3.15 present, against the interpreters' own answers
# (docs/versions.md); an absent version is reported as skipped.
check-versions: all
	tests/versions/check_versions.py

# CPython 3.14 and 3.15 from Debian sid/experimental, in a cached root
# (scripts/sidroot.sh): builds build-sid/ there and runs the functional
# suite under both. Exit status 77, after one line saying why, where no
# root can be had (no archive, no root privileges).
check-sid:
	scripts/sidroot.sh check

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
	install -m 755 $(LIBDIR)/*.so $(DESTDIR)$(PREFIX)/lib/strata/
	install -d $(DESTDIR)$(PREFIX)/lib/strata/python/strata
	install -m 644 $(PYPKG) $(DESTDIR)$(PREFIX)/lib/strata/python/strata/

clean:
	rm -rf $(BUILD)
