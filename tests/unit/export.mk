# export.mk — test tools and unit tests of the exporters (src/export/),
# included from unit.mk.
#
#   build/tests/synthprof   synthetic known-answer profiles for the export
#                           tests (tests/func/test_export_*.py)
#   test_export             every exporter on synthetic profiles (run by
#                           `make unit` and, with sanitizers, `make asan`)

EXPORT_OBJ = $(patsubst src/%.c,$(OBJ)/cli/%.o,$(EXPORT_SRC))

$(BUILD)/tests/synthprof: tests/tools/synthprof.c tests/unit/synth.h tests/unit/synthmodel.h $(UNIT_LIB_OBJ) $(EXPORT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -o $@ $< $(UNIT_LIB_OBJ) $(EXPORT_OBJ) $(CLI_LIBS)

# The unit test compiles the exporters in (each build, plain or sanitized,
# with its own flags).
test_export_EXTRA = $(EXPORT_SRC)

unit: $(BUILD)/tests/synthprof

# The exporters are compiled into the test, so they are prerequisites too.
$(UNIT_DIR)/test_export $(ASAN_DIR)/test_export: $(EXPORT_SRC) $(wildcard src/export/*.h) tests/unit/synthmodel.h

# The functional export tests run synthprof: keep it current for `make func`.
func: $(BUILD)/tests/synthprof
