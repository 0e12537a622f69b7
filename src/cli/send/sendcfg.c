/*
 * sendcfg.c — see sendcfg.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ctlproto.h"
#include "common/spool.h"
#include "sendcfg.h"

void send_cfg_init(struct send_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->timeout_ms = 10000;
	c->gzip = 1;
	c->every_ms = 15000;
	c->queue = 8;
	c->keep = 20;
}

void send_cfg_free(struct send_cfg *c)
{
	for (unsigned i = 0; i < c->nheaders; i++)
		free(c->headers[i]);
	for (unsigned i = 0; i < c->nattrs; i++)
		free(c->attrs[i]);
	c->nheaders = c->nattrs = 0;
}

/* Seconds (a decimal number) into milliseconds, within [lo, hi] ms. */
static int parse_secs(const char *v, unsigned lo, unsigned hi, unsigned *ms)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (!*v || *end || errno || !(d * 1000 >= lo) || !(d * 1000 <= hi))
		return -1;
	*ms = (unsigned)(d * 1000 + 0.5);
	return 0;
}

static int parse_count(const char *v, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (!*v || *end || errno || n < lo || n > hi)
		return -1;
	*out = (unsigned)n;
	return 0;
}

static int set_url(struct send_cfg *c, const char *v, char *err, size_t errlen)
{
	if (!strncmp(v, "file:", 5)) {
		if (!v[5]) {
			snprintf(err, errlen, "--send file:DIR needs a directory");
			return -1;
		}
		c->kind = SEND_FILE;
		snprintf(c->url, sizeof(c->url), "%s", v + 5);
		c->set = 1;
		return 0;
	}
	const char *rest = !strncmp(v, "http://", 7) ? v + 7 : !strncmp(v, "https://", 8) ? v + 8 : NULL;
	if (!rest || !*rest || *rest == '/') {
		snprintf(err, errlen, "cannot send to '%s': expected http://HOST[:PORT][/PATH], https://... or file:DIR", v);
		return -1;
	}
	if (strlen(v) + 32 >= sizeof(c->url)) {
		snprintf(err, errlen, "the URL is too long");
		return -1;
	}
	/* An endpoint without a path gets the signal's (as OTLP exporters do
	 * with OTEL_EXPORTER_OTLP_ENDPOINT); a path given is used as it is. */
	const char *path = strchr(rest, '/');
	if (!path || !strcmp(path, "/"))
		snprintf(c->url, sizeof(c->url), "%.*s/v1development/profiles", (int)(path ? path - v : (long)strlen(v)), v);
	else
		snprintf(c->url, sizeof(c->url), "%s", v);
	c->kind = SEND_HTTP;
	c->set = 1;
	return 0;
}

static int add_header(struct send_cfg *c, const char *v, char *err, size_t errlen)
{
	if (c->nheaders == SEND_MAX_HEADERS) {
		snprintf(err, errlen, "too many headers (at most %d)", SEND_MAX_HEADERS);
		return -1;
	}
	if (v[0] != '@') {
		const char *colon = strchr(v, ':');
		if (!colon || colon == v || strpbrk(v, "\r\n")) {
			snprintf(err, errlen, "invalid header '%.40s': expected 'Name: value', @FILE or env:NAME", v);
			return -1;
		}
	}
	if (!(c->headers[c->nheaders] = strdup(v))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->nheaders++;
	return 0;
}

static int add_attr(struct send_cfg *c, const char *v, char *err, size_t errlen)
{
	const char *eq = strchr(v, '=');
	if (!eq || eq == v || strpbrk(v, "\r\n")) {
		snprintf(err, errlen, "invalid attribute '%s': expected key=value", v);
		return -1;
	}
	if (c->nattrs == SEND_MAX_ATTRS) {
		snprintf(err, errlen, "too many attributes (at most %d)", SEND_MAX_ATTRS);
		return -1;
	}
	if (!(c->attrs[c->nattrs] = strdup(v))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->nattrs++;
	return 0;
}

int send_cfg_set(struct send_cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	if (!strcmp(key, "STRATA_SEND"))
		return set_url(c, val, err, errlen);
	if (!strcmp(key, "STRATA_SEND_EVERY")) {
		if (parse_secs(val, 100, 86400000, &c->every_ms)) {
			snprintf(err, errlen, "invalid window '%s': expected seconds, 0.1 to 86400", val);
			return -1;
		}
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_QUEUE")) {
		if (parse_count(val, 1, 10000, &c->queue)) {
			snprintf(err, errlen, "invalid queue '%s': expected 1..10000 windows", val);
			return -1;
		}
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_KEEP")) {
		if (parse_count(val, 1, 1000000, &c->keep)) {
			snprintf(err, errlen, "invalid count of files to keep '%s': expected 1..1000000", val);
			return -1;
		}
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_TIMEOUT")) {
		if (parse_secs(val, 100, 3600000, &c->timeout_ms)) {
			snprintf(err, errlen, "invalid timeout '%s': expected seconds, 0.1 to 3600", val);
			return -1;
		}
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_GZIP")) {
		c->gzip = strcmp(val, "0") != 0;
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_CA")) {
		if (access(val, R_OK)) {
			snprintf(err, errlen, "cannot read the CA file %s: %s", val, strerror(errno));
			return -1;
		}
		snprintf(c->ca, sizeof(c->ca), "%s", val);
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_SERVICE")) {
		snprintf(c->service, sizeof(c->service), "%s", val);
		return 0;
	}
	if (!strcmp(key, "STRATA_SEND_HEADER"))
		return add_header(c, val, err, errlen);
	if (!strcmp(key, "STRATA_SEND_ATTR"))
		return add_attr(c, val, err, errlen);
	if (!strcmp(key, "STRATA_SEND_ATTRS")) {
		/* key=value,key2=value2 (the variable's form) */
		char buf[4096];
		snprintf(buf, sizeof(buf), "%s", val);
		char *save = NULL;
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
			if (add_attr(c, t, err, errlen))
				return -1;
		return 0;
	}
	return 1;
}

int send_cfg_load(struct send_cfg *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char line[8192];
	int rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		if (send_cfg_set(c, line, eq + 1, err, errlen) < 0)
			rc = -1;
	}
	fclose(f);
	if (!rc && !c->set) {
		snprintf(err, errlen, "%s names nowhere to send to (STRATA_SEND)", path);
		rc = -1;
	}
	return rc;
}

const struct send_optdef send_optdefs[] = {
	{ "send", 1 }, { "every", 1 }, { "send-queue", 1 }, { "send-header", 1 }, { "send-ca", 1 },
	{ "send-timeout", 1 }, { "send-no-gzip", 0 }, { "service", 1 }, { "attr", 1 }, { "send-keep", 1 },
};
const unsigned send_noptdefs = sizeof(send_optdefs) / sizeof(send_optdefs[0]);
static const char *const send_optvars[] = {
	"STRATA_SEND", "STRATA_SEND_EVERY", "STRATA_SEND_QUEUE", "STRATA_SEND_HEADER", "STRATA_SEND_CA",
	"STRATA_SEND_TIMEOUT", "STRATA_SEND_GZIP", "STRATA_SEND_SERVICE", "STRATA_SEND_ATTR", "STRATA_SEND_KEEP",
};

const char send_options_help[] =
	"continuous profiling (docs/send.md):\n"
	"      --send URL       every --every seconds, send each process's window of\n"
	"                       samples as an OTLP profiles request to URL\n"
	"                       (http://HOST:4318 posts to /v1development/profiles), or\n"
	"                       with file:DIR write one pprof file per window into DIR\n"
	"      --every SECS     the window (default: 15)\n"
	"      --send-queue N   windows kept per process while the collector is down or\n"
	"                       slow; the oldest is dropped beyond (default: 8)\n"
	"      --send-header H  an HTTP header, 'Name: value'; @FILE reads header lines\n"
	"                       from FILE, env:NAME takes the header from variable NAME\n"
	"                       (keeps secrets out of ps); repeatable\n"
	"      --send-ca FILE   trust the CA certificates in FILE (default: the system's)\n"
	"      --send-timeout SECS  per request (default: 10)\n"
	"      --send-no-gzip   do not compress requests\n"
	"      --service NAME   service.name (default: the script or module name)\n"
	"      --attr KEY=VALUE another resource attribute; repeatable\n"
	"      --send-keep N    with file:DIR, pprof files kept (default: 20)\n";

int send_cfg_option(struct send_cfg *c, const char *name, const char *val, char *err, size_t errlen)
{
	for (unsigned i = 0; i < send_noptdefs; i++) {
		if (strcmp(send_optdefs[i].name, name))
			continue;
		if (!strcmp(name, "send-no-gzip"))
			val = "0";
		if (!strcmp(name, "send-header") && !strncmp(val, "env:", 4)) {
			const char *v = getenv(val + 4);
			if (!v || !*v) {
				snprintf(err, errlen, "--send-header %s: the variable %s is not set", val, val + 4);
				return -1;
			}
			val = v;
		}
		if (!strcmp(name, "send-header") && val[0] == '@' && access(val + 1, R_OK)) {
			snprintf(err, errlen, "--send-header %s: %s", val, strerror(errno));
			return -1;
		}
		return send_cfg_set(c, send_optvars[i], val, err, errlen) < 0 ? -1 : 0;
	}
	return 1;
}

int send_cfg_spool(const struct send_cfg *c, char *dir, size_t n, char *err, size_t errlen)
{
	char base[256];
	if (ctl_sock_dir(base, sizeof(base), getenv("XDG_RUNTIME_DIR"), geteuid()) || ctl_prepare_dir(base) ||
	    spool_make(dir, n, base, getpid())) {
		snprintf(err, errlen, "cannot make a spool directory in %s: %s", base, strerror(errno));
		return -1;
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, SPOOL_CONFIG);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		rmdir(dir);
		return -1;
	}
	fprintf(f, "STRATA_SEND=%s%s\n", c->kind == SEND_FILE ? "file:" : "", c->url);
	fprintf(f, "STRATA_SEND_EVERY=%.3f\nSTRATA_SEND_QUEUE=%u\nSTRATA_SEND_TIMEOUT=%.3f\nSTRATA_SEND_GZIP=%d\n",
		c->every_ms / 1000.0, c->queue, c->timeout_ms / 1000.0, c->gzip);
	fprintf(f, "STRATA_SEND_KEEP=%u\n", c->keep);
	if (c->ca[0])
		fprintf(f, "STRATA_SEND_CA=%s\n", c->ca);
	if (c->service[0])
		fprintf(f, "STRATA_SEND_SERVICE=%s\n", c->service);
	for (unsigned i = 0; i < c->nheaders; i++)
		fprintf(f, "STRATA_SEND_HEADER=%s\n", c->headers[i]);
	for (unsigned i = 0; i < c->nattrs; i++)
		fprintf(f, "STRATA_SEND_ATTR=%s\n", c->attrs[i]);
	if (fclose(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int push(char ***out, int *n, const char *s)
{
	char **no = realloc(*out, (size_t)(*n + 1) * sizeof(*no));
	if (!no)
		return -1;
	*out = no;
	if (!(no[*n] = strdup(s)))
		return -1;
	(*n)++;
	return 0;
}

int send_cfg_headers(const struct send_cfg *c, char ***out, char *err, size_t errlen)
{
	int n = 0;
	*out = NULL;
	for (unsigned i = 0; i < c->nheaders; i++) {
		if (c->headers[i][0] != '@') {
			if (push(out, &n, c->headers[i]))
				goto oom;
			continue;
		}
		FILE *f = fopen(c->headers[i] + 1, "re");
		if (!f) {
			snprintf(err, errlen, "header file %s: %s", c->headers[i] + 1, strerror(errno));
			goto fail;
		}
		char line[8192];
		while (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\r\n")] = 0;
			if (!line[0] || line[0] == '#')
				continue;
			if (!strchr(line, ':')) {
				snprintf(err, errlen, "header file %s: a line is not 'Name: value'", c->headers[i] + 1);
				fclose(f);
				goto fail;
			}
			if (push(out, &n, line)) {
				fclose(f);
				goto oom;
			}
		}
		fclose(f);
	}
	return n;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	for (int i = 0; i < n; i++)
		free((*out)[i]);
	free(*out);
	*out = NULL;
	return -1;
}

void send_url_display(const char *url, char *out, size_t n)
{
	/* Credentials in a URL (user:pass@) stay out of messages. */
	const char *s = strstr(url, "://");
	const char *at = s ? strchr(s + 3, '@') : NULL;
	const char *slash = s ? strchr(s + 3, '/') : NULL;
	if (at && (!slash || at < slash))
		snprintf(out, n, "%.*s%s", (int)(s + 3 - url), url, at + 1);
	else
		snprintf(out, n, "%s", url);
	out[strcspn(out, "?")] = 0;
}
