# tests/fuzz/fuzz.mk — the libFuzzer targets (tests/fuzz/fuzz_*.c), one
# per parser of bytes strata did not write (docs/fuzzing.md has the list).
# Included by tests/unit/unit.mk.
#
#   make fuzz-check   build every target, replay its seeds and fuzz it for
#                     FUZZ_CHECK_SECONDS (default 5) each: part of `make
#                     check` (two at a time there), so a target that stops
#                     building, or a crash, leak or undefined behaviour,
#                     fails the check
#   make fuzz         the same, FUZZ_SECONDS (default 60) per target, new
#                     inputs kept in $(FUZZ_DIR)/NAME/corpus; FUZZ_TARGETS
#                     picks targets (make fuzz FUZZ_TARGETS=cfi
#                     FUZZ_SECONDS=600); make -j2 fuzz runs two at once
#   make fuzz-build   only build them
#   make fuzz-corpus  make the seeds again (tests/fuzz/mkcorpus.py)
#
# A crashing input is saved as $(FUZZ_DIR)/NAME/crash-* (leak-*, timeout-*,
# oom-*); the run prints the command that replays it. The fix adds it to
# tests/fuzz/corpus/NAME/, which every run replays first.
#
# Every source is compiled once with the fuzzer's instrumentation into
# $(FUZZ_DIR)/obj; the CLI's objects (all of src/common, src/lib,
# src/export and src/cli but main.c) go into one archive that each target
# links, so a target finds any function of the CLI wherever it moves. The
# helper's (src/agentd) pieces are included by the targets that fuzz them.

FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 60
FUZZ_CHECK_SECONDS ?= 5
FUZZ_TARGETS  ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS   = -std=gnu11 -g -O1 $(WARN) $(CPPFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
		-fsanitize-coverage-ignorelist=tests/fuzz/coverage-ignore.txt \
		-DSTRATA_VERSION='"$(STRATA_VERSION)"'
# The CLI without its main(): every builtin and what they share.
FUZZ_LIB_SRC  = $(COMMON_SRC) $(LIB_SRC) $(EXPORT_SRC) $(filter-out src/cli/main.c,$(CLI_SRC))
FUZZ_LIB_OBJ  = $(patsubst src/%.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRC))
FUZZ_LIB      = $(FUZZ_DIR)/libstrata-fuzz.a
FUZZ_BINS     = $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))
# libFuzzer's options for every run: inputs up to 64 KiB (the seeds are
# cut to fit), a slow input (10 s) or 2 GiB of memory is a finding too.
FUZZ_OPTS     = -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1

$(FUZZ_DIR)/obj/%.o: src/%.c tests/fuzz/coverage-ignore.txt
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Per target: what it links beyond the CLI's archive, and seeds it shares
# with another target (besides its own tests/fuzz/corpus/NAME, which may
# hold only the inputs that once made it fail).
fuzz_jitpoll_LIBS = -lpthread
fuzz_pprof_SEEDS  = tests/fuzz/corpus/reader
# libdwfl's own leaks are suppressed (tests/fuzz/lsan.supp says why); to
# see that a leak is libdwfl's, the allocation's stack must be walked
# through libc, which costs the targets that have libdwfl look for debug
# files by an input's .gnu_debuglink.
FUZZ_ENV          = LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp
fuzz_elfsect_ENV  = ASAN_OPTIONS=fast_unwind_on_malloc=0

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_LIB) $(fuzz_$*_LIBS) $(CLI_LIBS)

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BINS:=.d)

fuzz-build: $(FUZZ_BINS)

# One target's run (tests/fuzz/run.sh): $(1) name, $(2) seconds, $(3) the
# directory new inputs go to; its own seeds and the ones it shares.
fuzz_run = $(FUZZ_ENV) $(fuzz_$(1)_ENV) FUZZ_OPTS='$(FUZZ_OPTS)' tests/fuzz/run.sh $(FUZZ_DIR) $(1) $(2) $(3) \
	   $(wildcard tests/fuzz/corpus/$(1)) $(fuzz_$(1)_SEEDS)

# make check: every target, one make target each (make check runs them
# -k -j: side by side, and every one even after one fails). New inputs go
# to a scratch directory emptied each time, so that a run's start
# (replaying what is there) stays as short as the seeds.
fuzz-check: $(patsubst %,fuzz-check-%,$(FUZZ_TARGETS))

# (Not .PHONY: make looks for no pattern rule for those.)
fuzz-check-%: $(FUZZ_DIR)/fuzz_%
	@rm -rf $(FUZZ_DIR)/$*/check; $(call fuzz_run,$*,$(FUZZ_CHECK_SECONDS),$(FUZZ_DIR)/$*/check) || \
		{ echo "fuzz-check FAILED: $*"; exit 1; }

fuzz: $(patsubst %,fuzz-run-%,$(FUZZ_TARGETS))

fuzz-run-%: $(FUZZ_DIR)/fuzz_%
	@$(call fuzz_run,$*,$(FUZZ_SECONDS),$(FUZZ_DIR)/$*/corpus)

# The seeds, made again from real inputs (tests/fuzz/mkcorpus.py says
# which); regress-* files stay.
fuzz-corpus: all $(FUZZ_DIR)/mkcorpus
	BUILD=$(BUILD) tests/fuzz/mkcorpus.py

$(FUZZ_DIR)/mkcorpus: tests/fuzz/mkcorpus.c $(UNIT_LIB_OBJ) tests/unit/synth.h
	@mkdir -p $(dir $@)
	$(CC) $(BASECFLAGS) -o $@ $< $(UNIT_LIB_OBJ) $(CLI_LIBS)

.PHONY: fuzz fuzz-build fuzz-check fuzz-corpus
