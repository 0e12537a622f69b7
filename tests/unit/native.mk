# native.mk — unit tests and test tools of --native (cfi, symbols, merge),
# included from unit.mk. The fixtures are built here from C sources with
# known functions and lines, so every expectation is computed, not copied.

NATIVE_LIB_OBJ = $(filter-out %/launch.o,$(patsubst src/%.c,$(OBJ)/cli/%.o,$(COMMON_SRC) $(LIB_SRC)))
NATIVE_TESTS   = $(BUILD)/tests/test_cfi $(BUILD)/tests/test_merge $(BUILD)/tests/test_symbols \
		 $(BUILD)/tests/test_native_model

$(BUILD)/tests/%: tests/unit/%.c $(NATIVE_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) $(UNIT_DEFS) -o $@ $< $(NATIVE_LIB_OBJ) $(CLI_LIBS) -ldl

# The fixture: a shared object with known symbols, a C++ function, and
# lines, compiled with -g (DWARF) and unwind tables; and a stripped copy
# (names come from its FDEs and PLT then).
$(BUILD)/tests/fixture_native.so: tests/unit/fixture_native.cc
	@mkdir -p $(dir $@)
	g++ -O1 -g -fPIC -shared -o $@ $<
	strip -o $(BUILD)/tests/fixture_native_stripped.so $@

.PHONY: unit-native
unit-native: $(NATIVE_TESTS) $(BUILD)/tests/fixture_native.so
	@set -e; for t in $(NATIVE_TESTS); do $$t $(BUILD)/tests/fixture_native.so; done
