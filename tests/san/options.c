/*
 * options.c — linked into the agent and the helper of the UBSan build only
 * (`make ubsan-func`, tests/san/san.mk): where the sanitizer writes its
 * reports. The helper's environment is not the program's (link.c passes
 * it a few variables only), and a test's program may have its own, so the
 * options are compiled in rather than taken from UBSAN_OPTIONS.
 */
#ifndef STRATA_SAN_LOG
#error "STRATA_SAN_LOG: the path prefix of the sanitizer's reports"
#endif

__attribute__((visibility("default"))) const char *__ubsan_default_options(void);

__attribute__((visibility("default"))) const char *__ubsan_default_options(void)
{
	return "log_path=" STRATA_SAN_LOG ":print_stacktrace=1:halt_on_error=1";
}
