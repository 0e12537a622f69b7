# tests/san/san.mk — functional tests against a UBSan build of strata
# (included by the top-level Makefile).
#
#   make ubsan-func   builds $(BUILD)/ubsan: the CLI, the agent, its helper
#                     and the interpreter modules with -fsanitize=undefined,
#                     no recovery (tests/san/options.c sends the reports to
#                     $(BUILD)/ubsan/log); runs UBSAN_TESTS of the functional
#                     suite with that build; fails on any report.
#
# The unit tests' sanitizer run (make asan) covers what the CLI does with
# bytes; this covers the agent's signal path and the helper (the writer,
# the wall sampler, the remote reader) on real programs. ASan is not used:
# the helper maps the program's shared region at the program's address,
# which ASan's shadow and allocator may hold.

UBSAN_DIR    = $(BUILD)/ubsan
UBSAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=undefined -fno-sanitize-recover=undefined
# The functional tests where the agent's and the helper's work is widest:
# both sampling modes and every record, why threads wait, asyncio's tasks,
# native stacks (the signal handler's unwinder): 55 s on 2 cores alone;
# make check runs them beside its last stage. UBSAN_TESTS and
# UBSAN_PYTHONS widen the run (the whole suite: about 12 minutes).
UBSAN_TESTS ?= tests/func/test_record.py tests/func/test_idle.py tests/func/test_async.py \
	       tests/func/test_native.py
.PHONY: ubsan-build ubsan-func
ubsan-build:
	$(MAKE) BUILD=$(UBSAN_DIR) SAN_EXTRA=tests/san/options.c \
		'CFLAGS=$(UBSAN_CFLAGS) -DSTRATA_SAN_LOG="\"$(abspath $(UBSAN_DIR))/log/ubsan\""' all

# Under the newest Python pyenv has (with NumPy for the native tests).
# With Debian's 3.11 too, make check took 1495 s (fresh35): this run,
# beside the sid suite, made that stage 80 s longer, near the budget.
UBSAN_PYTHONS ?= 3.13
ubsan-func: ubsan-build check-pythons
	@rm -rf $(UBSAN_DIR)/log && mkdir -p $(UBSAN_DIR)/log
	scripts/pyenvs.sh
	STRATA_BUILD=$(abspath $(UBSAN_DIR)) STRATA_TEST_PYTHONS="$(UBSAN_PYTHONS)" /usr/bin/python3 -m pytest \
		-p no:cacheprovider -q -ra -n $$(( $$(nproc) + 1 )) $(UBSAN_TESTS); rc=$$?; \
	if [ -n "$$(ls $(UBSAN_DIR)/log)" ]; then \
		echo "ubsan-func: undefined behaviour (reports in $(UBSAN_DIR)/log):"; \
		grep -h -A12 "runtime error" $(UBSAN_DIR)/log/* | head -80; exit 1; \
	fi; exit $$rc
