# native.mk — unit tests of --native (cfi, symbols, merge, the model's
# native frames), included from unit.mk: `make unit` runs them, `make asan`
# runs them under ASan + UBSan too, `make valgrind` under valgrind. The
# fixtures are built here from C sources with known functions and lines,
# so every expectation is computed, not copied.

NATIVE_LIB_OBJ = $(filter-out %/launch.o,$(patsubst src/%.c,$(OBJ)/cli/%.o,$(COMMON_SRC) $(LIB_SRC)))
NATIVE_TESTS   = $(BUILD)/tests/test_cfi $(BUILD)/tests/test_merge $(BUILD)/tests/test_symbols \
		 $(BUILD)/tests/test_native_model
# Unwind rules derived from machine code (the helper's cfi-synth.c), checked
# against the CFI clang and gcc write for a fixture built both ways.
CFISYNTH_TEST  = $(BUILD)/tests/test_cfisynth
CFISYNTH_FIX   = $(BUILD)/tests/cfisynth
test_cfisynth_EXTRA = src/agentd/cfi-synth.c
# Each test with its argument (run_tests' TEST@ARG).
NATIVE_RUNS    = $(NATIVE_TESTS:=@$(BUILD)/tests/fixture_native.so) $(CFISYNTH_TEST)@$(CFISYNTH_FIX)

$(BUILD)/tests/%: tests/unit/%.c $(NATIVE_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(UNIT_DEFS) -o $@ $< $($(*F)_EXTRA) $(NATIVE_LIB_OBJ) $(CLI_LIBS) -ldl

$(CFISYNTH_TEST): src/agentd/cfi-synth.c src/agentd/cfi-synth.h

$(CFISYNTH_FIX)/clang.so: tests/unit/fixture_cfisynth.c
	@mkdir -p $(dir $@)
	clang -O2 -fPIC -shared -fasynchronous-unwind-tables -o $@ $<

$(CFISYNTH_FIX)/gcc.so: tests/unit/fixture_cfisynth.c
	@mkdir -p $(dir $@)
	gcc -O2 -fPIC -shared -fasynchronous-unwind-tables -o $@ $<

# The fixture: a shared object with known symbols, a C++ function, and
# lines, compiled with -g (DWARF) and unwind tables; and a stripped copy
# (names come from its FDEs and PLT then).
$(BUILD)/tests/fixture_native.so: tests/unit/fixture_native.cc
	@mkdir -p $(dir $@)
	g++ -O1 -g -fPIC -shared -o $@ $<
	strip -o $(BUILD)/tests/fixture_native_stripped.so $@

.PHONY: unit-native
unit-native: $(NATIVE_TESTS) $(CFISYNTH_TEST) $(BUILD)/tests/fixture_native.so $(CFISYNTH_FIX)/clang.so \
	     $(CFISYNTH_FIX)/gcc.so
	$(call run_tests,$(NATIVE_RUNS),)

# The same tests with ASan + UBSan (unit.mk's sanitizer build of the
# library; leaks are errors).
NATIVE_ASAN = $(patsubst $(BUILD)/tests/%,$(ASAN_DIR)/%,$(NATIVE_TESTS))
CFISYNTH_ASAN = $(ASAN_DIR)/test_cfisynth
$(CFISYNTH_ASAN): src/agentd/cfi-synth.c src/agentd/cfi-synth.h

.PHONY: asan-native
asan-native: $(NATIVE_ASAN) $(CFISYNTH_ASAN) $(BUILD)/tests/fixture_native.so $(CFISYNTH_FIX)/clang.so \
	     $(CFISYNTH_FIX)/gcc.so
	$(call run_tests,$(NATIVE_ASAN:=@$(BUILD)/tests/fixture_native.so) $(CFISYNTH_ASAN)@$(CFISYNTH_FIX),$(SAN_ENV))

# Every unit test under valgrind's memcheck (definite leaks and invalid
# accesses fail the run). The report CLI checks stay with `make unit`.
VALGRIND = valgrind -q --error-exitcode=87 --leak-check=full --errors-for-leak-kinds=definite \
	   --show-leak-kinds=definite
.PHONY: valgrind
valgrind: $(UNIT_BINS) $(NATIVE_TESTS) $(CFISYNTH_TEST) $(BUILD)/tests/fixture_native.so $(CFISYNTH_FIX)/clang.so \
	  $(CFISYNTH_FIX)/gcc.so
	$(call run_tests,$(UNIT_BINS) $(NATIVE_RUNS),$(VALGRIND))
