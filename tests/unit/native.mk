# native.mk — unit tests and test tools of --native (cfi, symbols, merge),
# included from unit.mk. The fixtures are built here from C sources with
# known functions and lines, so every expectation is computed, not copied.

NATIVE_LIB_OBJ = $(filter-out %/launch.o,$(patsubst src/%.c,$(OBJ)/cli/%.o,$(COMMON_SRC) $(LIB_SRC)))
NATIVE_TESTS   = $(BUILD)/tests/test_cfi $(BUILD)/tests/test_merge $(BUILD)/tests/test_symbols
NATIVE_TOOLS   = $(BUILD)/tests/nstacks

$(BUILD)/tests/%: tests/unit/%.c $(NATIVE_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -o $@ $< $(NATIVE_LIB_OBJ) $(CLI_LIBS) -ldl

$(BUILD)/tests/nstacks: tests/tools/nstacks.c $(NATIVE_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -o $@ $< $(NATIVE_LIB_OBJ) $(CLI_LIBS)

# The fixture: a shared object with known symbols, a C++ function, and
# lines, compiled with -g (DWARF) and unwind tables.
$(BUILD)/tests/fixture_native.so: tests/unit/fixture_native.cc
	@mkdir -p $(dir $@)
	g++ -O1 -g -fPIC -shared -o $@ $<

.PHONY: unit-native
unit-native: $(NATIVE_TESTS) $(NATIVE_TOOLS) $(BUILD)/tests/fixture_native.so
	@set -e; for t in $(NATIVE_TESTS); do $$t $(BUILD)/tests/fixture_native.so; done
