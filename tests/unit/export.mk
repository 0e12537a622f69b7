# export.mk — test tools and unit tests of the exporters (src/export/),
# included from unit.mk.
#
#   build/tests/synthprof   synthetic known-answer profiles for the export
#                           tests (tests/func/test_export_*.py)
#   test_export             every exporter on synthetic profiles (run by
#                           `make unit` and, with sanitizers, `make asan`)

$(BUILD)/tests/synthprof: tests/tools/synthprof.c tests/unit/synth.h tests/unit/synthmodel.h $(UNIT_LIB_OBJ) $(UNIT_EXPORT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -o $@ $< $(UNIT_LIB_OBJ) $(UNIT_EXPORT_OBJ) $(CLI_LIBS)

# The unit test links the exporters built for its flavour (plain or
# sanitized), as test_export_web does (unit.mk).
test_export_EXTRA = $(if $(findstring $(ASAN_DIR)/,$@),$(ASAN_EXPORT_OBJ),$(UNIT_EXPORT_OBJ))
$(UNIT_DIR)/test_export: $(UNIT_EXPORT_OBJ) tests/unit/synthmodel.h
$(ASAN_DIR)/test_export: $(ASAN_EXPORT_OBJ) tests/unit/synthmodel.h

unit: $(BUILD)/tests/synthprof

# The functional export tests run synthprof: keep it current for `make func`.
func: $(BUILD)/tests/synthprof

# Continuous profiling's settings and the OTLP encoder (test_send.c): the
# settings are the CLI's (src/cli/send/sendcfg.c), compiled in.
test_send_EXTRA = src/cli/send/sendcfg.c $(if $(findstring $(ASAN_DIR)/,$@),$(ASAN_EXPORT_OBJ),$(UNIT_EXPORT_OBJ))
$(UNIT_DIR)/test_send: $(UNIT_EXPORT_OBJ) tests/unit/synthmodel.h src/cli/send/sendcfg.c src/cli/send/sendcfg.h
$(ASAN_DIR)/test_send: $(ASAN_EXPORT_OBJ) tests/unit/synthmodel.h src/cli/send/sendcfg.c src/cli/send/sendcfg.h
