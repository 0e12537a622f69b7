# tests/unit/unit.mk — C unit tests, sanitizer runs and the fuzz targets
# (included by the top-level Makefile).
#
#   make unit        build and run every tests/unit/test_*.c, then the
#                    report CLI checks (tests/unit/report-cli.sh)
#   make asan        the same, built with ASan + UBSan (no recovery) in
#                    $(BUILD)/asan, leak checking on
#   make fuzz-check, make fuzz   the libFuzzer targets: tests/fuzz/fuzz.mk
#   make bench-load  time loading + aggregating a synthetic 1M-sample profile
#                    (bench-load-native: with native stacks)
#
# Tests are linked against the same library objects as the CLI; the asan
# build compiles its own copies.

UNIT_DIR  = $(BUILD)/unit
ASAN_DIR  = $(BUILD)/asan
FUZZ_DIR  = $(BUILD)/fuzz

# The --native tests take a fixture argument: native.mk runs them.
NATIVE_UNIT_SRC = tests/unit/test_cfi.c tests/unit/test_merge.c tests/unit/test_symbols.c \
		  tests/unit/test_native_model.c tests/unit/test_cfisynth.c
UNIT_TESTS   = $(filter-out $(NATIVE_UNIT_SRC),$(wildcard tests/unit/test_*.c))
# launch.c needs the CLI (agent_dir); the tests do not launch anything.
UNIT_LIB_SRC = $(COMMON_SRC) $(filter-out src/lib/launch.c,$(LIB_SRC))
UNIT_DEFS    = -DSRCDIR='"$(CURDIR)"'
SAN_FLAGS    = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

UNIT_LIB_OBJ = $(patsubst src/%.c,$(OBJ)/cli/%.o,$(UNIT_LIB_SRC))
UNIT_BINS    = $(patsubst tests/unit/%.c,$(UNIT_DIR)/%,$(UNIT_TESTS))
ASAN_LIB_OBJ = $(patsubst src/%.c,$(ASAN_DIR)/obj/%.o,$(UNIT_LIB_SRC))
ASAN_CLI_OBJ = $(patsubst src/%.c,$(ASAN_DIR)/obj/%.o,$(CLI_SRC) $(EXPORT_SRC) src/lib/launch.c)
ASAN_BINS    = $(patsubst tests/unit/%.c,$(ASAN_DIR)/%,$(UNIT_TESTS))

# Tests of agent pieces compile those sources in (the agent is a preloaded
# library, not something the tests link against).
test_srcqual_EXTRA = src/py/srcqual.c -lpthread
test_offcheck_EXTRA = src/py/offcheck.c
# remote_read is the test's own (its memory is the target's).
test_jitfind_EXTRA = src/agentd/jit-find.c
# remote.c itself, against a fork child's memory.
test_remote_EXTRA = src/agentd/remote.c src/agentd/target.c src/shm/util.c
$(UNIT_DIR)/test_remote $(ASAN_DIR)/test_remote: src/agentd/remote.c src/agentd/target.c src/shm/util.c
# The shared region, in this process and a fork child of it.
test_shm_EXTRA = src/shm/shm.c src/shm/util.c -lpthread
$(UNIT_DIR)/test_shm $(ASAN_DIR)/test_shm: src/shm/shm.c src/shm/util.c
# The GOT redirection, on two builds of one fixture library (the argument:
# where they are). The fixtures take no sanitizer: they are the kind of
# library the agent meets.
test_got_EXTRA = src/agent/got.c -ldl -lpthread
GOT_FIX = $(BUILD)/tests/got
$(GOT_FIX)/fixture_got_now.so: tests/unit/fixture_got.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -Wl,-z,relro,-z,now -o $@ $<
$(GOT_FIX)/fixture_got_lazy.so: tests/unit/fixture_got.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -fPIC -shared -Wl,-z,norelro,-z,lazy -o $@ $<
GOT_FIXTURES = $(GOT_FIX)/fixture_got_now.so $(GOT_FIX)/fixture_got_lazy.so
$(UNIT_DIR)/test_got $(ASAN_DIR)/test_got: | $(GOT_FIXTURES)

# The exporters' tests link the exporters, built for the flavour at hand.
UNIT_EXPORT_OBJ = $(patsubst src/%.c,$(OBJ)/cli/%.o,$(EXPORT_SRC))
ASAN_EXPORT_OBJ = $(patsubst src/%.c,$(ASAN_DIR)/obj/%.o,$(EXPORT_SRC))
test_export_web_EXTRA = $(if $(findstring $(ASAN_DIR)/,$@),$(ASAN_EXPORT_OBJ),$(UNIT_EXPORT_OBJ))
$(UNIT_DIR)/test_export_web: $(UNIT_EXPORT_OBJ)
$(ASAN_DIR)/test_export_web: $(ASAN_EXPORT_OBJ)

# Sanitizer reports must fail the run, leaks included.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=86 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86

$(UNIT_DIR)/%: tests/unit/%.c $(UNIT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(UNIT_DEFS) -MMD -MP -o $@ $< $($(*F)_EXTRA) $(UNIT_LIB_OBJ) $(CLI_LIBS)

$(ASAN_DIR)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CPPFLAGS) -O1 -g $(SAN_FLAGS) -MMD -MP -DSTRATA_VERSION='"$(STRATA_VERSION)"' -c $< -o $@

$(ASAN_DIR)/%: tests/unit/%.c $(ASAN_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) $(CPPFLAGS) -O1 -g $(SAN_FLAGS) $(UNIT_DEFS) -MMD -MP -o $@ $< $($(*F)_EXTRA) $(ASAN_LIB_OBJ) $(CLI_LIBS)

$(ASAN_DIR)/strata: $(ASAN_LIB_OBJ) $(ASAN_CLI_OBJ)
	$(CC) -g $(SAN_FLAGS) -o $@ $^ $(CLI_LIBS)

-include $(UNIT_BINS:=.d) $(ASAN_BINS:=.d) $(ASAN_LIB_OBJ:.o=.d) $(ASAN_CLI_OBJ:.o=.d)

# Runs each test binary; every one runs even after a failure. A test
# written TEST@ARG is run with the argument ARG.
define run_tests
	@fail=0; for t in $(1); do echo "== $$t"; $(2) $${t%%@*} $$(case $$t in *@*) echo $${t#*@};; esac) || fail=1; \
	done; if [ $$fail -ne 0 ]; then echo "unit tests FAILED"; exit 1; fi
endef

# The tests that take an argument, written TEST@ARG.
with_args = $(patsubst %/test_got,%/test_got@$(GOT_FIX),$(1))

include tests/unit/native.mk
include tests/unit/export.mk

unit: $(UNIT_BINS) $(BIN)/strata unit-native
	$(call run_tests,$(call with_args,$(UNIT_BINS)),)
	tests/unit/report-cli.sh $(BIN)/strata

asan: $(ASAN_BINS) $(ASAN_DIR)/strata asan-native
	$(call run_tests,$(call with_args,$(ASAN_BINS)),$(SAN_ENV))
	$(SAN_ENV) tests/unit/report-cli.sh $(ASAN_DIR)/strata

include tests/fuzz/fuzz.mk

# ---- model speed ------------------------------------------------------------

$(UNIT_DIR)/genprof: tests/unit/genprof.c $(UNIT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -MMD -MP -o $@ $< $(UNIT_LIB_OBJ) $(CLI_LIBS)

BENCH_SAMPLES ?= 1000000
bench-load: $(UNIT_DIR)/genprof $(BIN)/strata
	$(UNIT_DIR)/genprof -n $(BENCH_SAMPLES) -o $(UNIT_DIR)/large.strata
	$(UNIT_DIR)/genprof --time $(UNIT_DIR)/large.strata
	@/usr/bin/time -f "strata report --json: %e s, %M KB max RSS" $(BIN)/strata report --json $(UNIT_DIR)/large.strata > /dev/null

# The same with native stacks into this machine's python3.11 and libc:
# what symbolizing and merging add to loading.
bench-load-native: $(UNIT_DIR)/genprof $(BIN)/strata
	$(UNIT_DIR)/genprof --native -n $(BENCH_SAMPLES) -o $(UNIT_DIR)/large-native.strata
	$(UNIT_DIR)/genprof --time $(UNIT_DIR)/large-native.strata
	@/usr/bin/time -f "strata report --json: %e s, %M KB max RSS" $(BIN)/strata report --json $(UNIT_DIR)/large-native.strata > /dev/null

.PHONY: bench-load bench-load-native
