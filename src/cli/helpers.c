/*
 * helpers.c — what every builtin shares (builtin.h): messages, parsing a
 * number option, loading a profile, locating the agent. Kept out of main.c
 * so that everything but main() links into other programs too: the
 * fuzz targets (tests/fuzz/) link the whole CLI except main.c, so they
 * cannot lose a helper when one moves.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "lib/profile.h"

void errorf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("strata: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

struct profile *cli_load_profile(const char *path, const struct load_opts *lo, const char *type, const char *task)
{
	char err[512];
	struct profile *p = profile_load(path, lo, err, sizeof(err));
	if (!p) {
		errorf("%s: %s", path, err);
		return NULL;
	}
	for (uint32_t i = 0; i < p->nwarnings; i++)
		warnf("%s: %s", path, p->warnings[i]);
	if ((type && profile_filter_type(p, type, err, sizeof(err))) ||
	    (task && profile_filter_task(p, task, err, sizeof(err)))) {
		errorf("%s: %s", path, err);
		profile_free(p);
		return NULL;
	}
	return p;
}

void warnf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("strata: warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void die_usage(const char *u)
{
	fputs(u, stderr);
	exit(2);
}

const char *agent_dir(void)
{
	static char dir[PATH_MAX];
	if (dir[0])
		return dir;
	const char *env = getenv("STRATA_AGENT_DIR");
	if (env && *env) {
		snprintf(dir, sizeof(dir), "%s", env);
		return dir;
	}
	char exe[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	/* bin/strata next to lib/strata/ — the same in the build tree and
	 * in an installed prefix. */
	snprintf(dir, sizeof(dir), "%s/../lib/strata", exe);
	char real[PATH_MAX];
	if (realpath(dir, real))
		snprintf(dir, sizeof(dir), "%s", real);
	return dir;
}

int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end || errno || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}
