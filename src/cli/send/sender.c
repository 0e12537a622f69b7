/*
 * sender.c — the spool loop (sender.h).
 *
 * Windows are taken oldest first. A request that fails for a reason that
 * may pass (the collector down, slow, throttling, a 5xx) is retried with
 * a backoff doubling from 1 s to 30 s, the same window first, so order is
 * kept; meanwhile the helpers keep at most their queue of windows and
 * drop the oldest (a window this loop is retrying is then abandoned). A
 * refusal about the request itself (another 4xx) drops that window, said
 * once. Messages go to stderr (the service's log, or strata record's
 * terminal) when things change: the first failure, the recovery, the
 * end. Counts go to the status file (`strata ctl PID status` shows them).
 *
 * The end: once no helper holds the directory (every profiled process
 * ended, or stopped sending), or on SIGTERM, what is left is tried once
 * more, within one timeout, and the directory is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/spool.h"
#include "export/export.h"
#include "export/otlp.h"
#include "lib/profile.h"
#include "sender.h"

struct sender {
	struct send_cfg cfg;
	struct http *http;
	char dir[512];
	char url[4096];           /* for messages */
	uint64_t windows, sent, failed, samples;
	pid_t pids[512];
	unsigned npids;
	int failing;
	char err[512];
	unsigned backoff_ms;
};

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void note_pid(struct sender *s, pid_t pid)
{
	for (unsigned i = 0; i < s->npids; i++)
		if (s->pids[i] == pid)
			return;
	if (s->npids < sizeof(s->pids) / sizeof(s->pids[0]))
		s->pids[s->npids++] = pid;
}

static void write_status(struct sender *s)
{
	if (!s->dir[0])
		return;
	char tmp[1024], path[1024];
	snprintf(tmp, sizeof(tmp), "%s/.status.tmp", s->dir);
	snprintf(path, sizeof(path), "%s/%s", s->dir, SPOOL_STATUS);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return;
	fprintf(f, "pid=%d\nwindows=%llu\nsent=%llu\nfailed=%llu\nsamples=%llu\nprocesses=%u\nerror=%s\n", (int)getpid(),
		(unsigned long long)s->windows, (unsigned long long)s->sent, (unsigned long long)s->failed,
		(unsigned long long)s->samples, s->npids, s->failing ? s->err : "");
	if (fclose(f) == 0)
		rename(tmp, path);
	else
		unlink(tmp);
}

/* ---- one window --------------------------------------------------------------- */

/* file:DIR: the window as a pprof file, at most cfg.keep of ours kept. */
static int write_pprof(struct sender *s, const struct profile *p, const char *svc, uint64_t t_ns, pid_t pid,
		       char *msg, size_t mn)
{
	const char *dir = s->cfg.url;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		snprintf(msg, mn, "%.300s: %s", dir, strerror(errno));
		return HTTP_RETRY;
	}
	time_t sec = (time_t)(t_ns / 1000000000u);
	struct tm tm;
	gmtime_r(&sec, &tm);
	char stamp[64], path[4600], tmp[4700];
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	snprintf(path, sizeof(path), "%s/strata-%s-%d-%s.%03uZ.pb.gz", dir, svc, (int)pid, stamp,
		 (unsigned)(t_ns / 1000000u % 1000));
	snprintf(tmp, sizeof(tmp), "%s/.strata-%d.tmp", dir, (int)getpid());
	FILE *f = fopen(tmp, "we");
	if (!f) {
		snprintf(msg, mn, "%.300s: %s", tmp, strerror(errno));
		return HTTP_RETRY;
	}
	const struct exporter *ex = exporter_find("pprof");
	struct export_opts eo = { .title = p->command };
	int rc = ex->fn(p, f, &eo, msg, mn);
	if (fclose(f) || rc || rename(tmp, path)) {
		if (!rc)
			snprintf(msg, mn, "%.300s: %s", path, strerror(errno));
		unlink(tmp);
		return HTTP_RETRY;
	}
	/* Rotation: the oldest of ours beyond cfg.keep go (names sort by
	 * time within a service and process; mtimes order them all). */
	DIR *d = opendir(dir);
	struct ent {
		char name[512];
		struct timespec t;
	} *es = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (strncmp(de->d_name, "strata-", 7) || l < 7 || strcmp(de->d_name + l - 6, ".pb.gz") ||
		    l >= sizeof(es->name))
			continue;
		struct stat st;
		char full[5200];
		snprintf(full, sizeof(full), "%s/%s", dir, de->d_name);
		if (stat(full, &st))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct ent *ne = realloc(es, cap * sizeof(*ne));
			if (!ne)
				break;
			es = ne;
		}
		snprintf(es[n].name, sizeof(es[n].name), "%s", de->d_name);
		es[n++].t = st.st_mtim;
	}
	if (d)
		closedir(d);
	while (n > s->cfg.keep) {
		size_t oldest = 0;
		for (size_t i = 1; i < n; i++)
			if (es[i].t.tv_sec < es[oldest].t.tv_sec ||
			    (es[i].t.tv_sec == es[oldest].t.tv_sec && es[i].t.tv_nsec < es[oldest].t.tv_nsec) ||
			    (es[i].t.tv_sec == es[oldest].t.tv_sec && es[i].t.tv_nsec == es[oldest].t.tv_nsec &&
			     strcmp(es[i].name, es[oldest].name) < 0))
				oldest = i;
		char full[5200];
		snprintf(full, sizeof(full), "%s/%s", dir, es[oldest].name);
		unlink(full);
		es[oldest] = es[--n];
	}
	free(es);
	return HTTP_OK;
}

/* A window, loaded and encoded: the request's body (HTTP), or written
 * (file:). Returns HTTP_OK with *body set (HTTP) or done (file:),
 * HTTP_RETRY, or HTTP_REJECTED for a window that cannot be read. */
static int prepare(struct sender *s, const char *path, uint64_t t_ns, pid_t pid, struct pb *body, uint64_t *samples,
		   char *msg, size_t mn)
{
	struct load_opts lo = { 0 };
	char err[512];
	struct profile *p = profile_load(path, &lo, err, sizeof(err));
	if (!p) {
		snprintf(msg, mn, "window %s unreadable: %s", path, err);
		return HTTP_REJECTED;
	}
	*samples = p->nevents ? p->totals[0] : 0;
	int rc;
	if (s->cfg.kind == SEND_FILE) {
		char svc[256];
		if (s->cfg.service[0])
			snprintf(svc, sizeof(svc), "%s", s->cfg.service);
		else
			otlp_service_name(p->nprocs ? p->procs[0].command : NULL, svc, sizeof(svc));
		for (char *c = svc; *c; c++)
			if (*c == '/' || *c == ' ')
				*c = '_';
		rc = write_pprof(s, p, svc, t_ns, pid, msg, mn);
	} else {
		struct otlp_opts oo = { .service = s->cfg.service[0] ? s->cfg.service : NULL,
					.attrs = (const char *const *)s->cfg.attrs, .nattrs = s->cfg.nattrs };
		rc = otlp_encode(p, &oo, body, msg, mn) ? HTTP_RETRY : HTTP_OK;
	}
	profile_free(p);
	return rc;
}

static void failure(struct sender *s, const char *msg)
{
	if (!s->failing || strcmp(s->err, msg))
		fprintf(stderr, "strata: sending the profile to %s failed: %s; retrying (each process keeps its last %u "
				"windows meanwhile)\n",
			s->url, msg, s->cfg.queue);
	s->failing = 1;
	snprintf(s->err, sizeof(s->err), "%.500s", msg);
	write_status(s);
}

/* Sends one window, retrying while it may succeed. final: one try (the
 * end). Returns 0 when the window is done with (sent, refused, or
 * dropped by its helper meanwhile), -1 when it failed and was kept. */
static int one(struct sender *s, const char *name, uint64_t t_ns, pid_t pid, int final)
{
	char path[1024], msg[1024];
	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	struct pb body = { 0 };
	uint64_t samples = 0;
	int rc = prepare(s, path, t_ns, pid, &body, &samples, msg, sizeof(msg));
	if (rc == HTTP_REJECTED && access(path, F_OK))
		return 0; /* dropped by its helper just now */
	/* The request is made once and posted again on each retry. */
	int encoded = rc == HTTP_OK && s->cfg.kind == SEND_HTTP;
	note_pid(s, pid);
	s->windows++;
	for (;;) {
		if (rc == HTTP_OK && s->cfg.kind == SEND_HTTP)
			rc = http_post(s->http, body.d, body.len, msg, sizeof(msg));
		else if (rc == HTTP_OK)
			msg[0] = 0;
		if (rc == HTTP_OK) {
			if (msg[0])
				fprintf(stderr, "strata: %s\n", msg);
			unlink(path);
			s->sent++;
			s->samples += samples;
			if (s->failing)
				fprintf(stderr, "strata: sending the profile to %s works again\n", s->url);
			s->failing = 0;
			s->backoff_ms = 0;
			break;
		}
		if (rc == HTTP_REJECTED) {
			fprintf(stderr, "strata: a window of process %d was not taken by %s: %s\n", (int)pid, s->url, msg);
			unlink(path);
			s->failed++;
			break;
		}
		failure(s, msg);
		if (final || stopping) {
			free(body.d);
			s->windows--;
			return -1;
		}
		/* Back off, watching for the window's drop and the end. */
		s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : 1000;
		if (s->backoff_ms > 30000)
			s->backoff_ms = 30000;
		for (unsigned w = 0; w < s->backoff_ms && !stopping; w += 100) {
			sleep_ms(100);
			if (access(path, F_OK) || !spool_has_writers(s->dir))
				break;
		}
		if (access(path, F_OK)) {
			/* Its helper dropped it (queue full): counted there. */
			s->windows--;
			break;
		}
		if (!spool_has_writers(s->dir))
			final = 1;
		if (encoded) {
			rc = HTTP_OK;
		} else {
			body.len = 0;
			body.oom = 0;
			rc = prepare(s, path, t_ns, pid, &body, &samples, msg, sizeof(msg));
			encoded = rc == HTTP_OK && s->cfg.kind == SEND_HTTP;
		}
	}
	free(body.d);
	write_status(s);
	return 0;
}

/* ---- the directory ---------------------------------------------------------- */

struct win {
	char name[64];
	uint64_t t;
	pid_t pid;
};

static int win_cmp(const void *a, const void *b) { return strcmp(((const struct win *)a)->name, ((const struct win *)b)->name); }

/* The published windows, oldest first (*n of them, malloc'ed). */
static struct win *list(const char *dir, size_t *n)
{
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	struct win *w = NULL;
	size_t cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct win x;
		if (!spool_window_parse(de->d_name, &x.t, &x.pid) || strlen(de->d_name) >= sizeof(x.name))
			continue;
		snprintf(x.name, sizeof(x.name), "%s", de->d_name);
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			struct win *nw = realloc(w, cap * sizeof(*nw));
			if (!nw)
				break;
			w = nw;
		}
		w[(*n)++] = x;
	}
	closedir(d);
	if (*n)
		qsort(w, *n, sizeof(*w), win_cmp);
	return w;
}

/* What the helpers dropped (drops-PID files). */
static uint64_t helper_drops(const char *dir)
{
	uint64_t total = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "drops-", 6))
			continue;
		char p[1024], v[32];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (spool_kv_get(p, "dropped", v, sizeof(v)) == 0)
			total += strtoull(v, NULL, 10);
	}
	if (d)
		closedir(d);
	return total;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char p[1024];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

int sender_run(const char *dir, int flags)
{
	struct sender s;
	memset(&s, 0, sizeof(s));
	send_cfg_init(&s.cfg);
	snprintf(s.dir, sizeof(s.dir), "%s", dir);
	int lock = spool_take_sender(dir);
	if (lock < 0)
		return 0; /* another sender serves it */
	/* Never at the program's expense: below it for the CPU. */
	int nice = getpriority(PRIO_PROCESS, 0);
	if (nice < 10)
		setpriority(PRIO_PROCESS, 0, 10);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	char cfgpath[1024], err[1024];
	snprintf(cfgpath, sizeof(cfgpath), "%s/%s", dir, SPOOL_CONFIG);
	int bad = send_cfg_load(&s.cfg, cfgpath, err, sizeof(err));
	if (!bad)
		send_url_display(s.cfg.kind == SEND_FILE ? s.cfg.url : s.cfg.url, s.url, sizeof(s.url));
	if (!bad && s.cfg.kind == SEND_HTTP && !(s.http = http_new(&s.cfg, err, sizeof(err))))
		bad = 1;
	if (bad) {
		/* Windows still come (the helpers keep their queue): each is
		 * dropped, the reason said once. */
		fprintf(stderr, "strata: cannot send the profile: %s\n", err);
		s.failing = 1;
		snprintf(s.err, sizeof(s.err), "%.500s", err);
	}
	write_status(&s);
	int gave_up = 0;
	for (;;) {
		int writers = spool_has_writers(dir);
		int final = !writers || stopping;
		/* The oldest window, listed afresh each time: while one was
		 * being retried, the helpers may have dropped others. */
		size_t n;
		struct win *w = list(dir, &n);
		if (n && bad) {
			char p[1024];
			snprintf(p, sizeof(p), "%s/%s", dir, w[0].name);
			unlink(p);
			s.failed++;
		} else if (n && one(&s, w[0].name, w[0].t, w[0].pid, final)) {
			/* The end, and the collector does not answer: what is
			 * left is not sent. */
			gave_up += (int)n;
		}
		free(w);
		if (final && (gave_up || !n))
			break;
		if (!n)
			sleep_ms(200);
	}
	uint64_t dropped = helper_drops(dir);
	write_status(&s);
	if ((flags & SENDER_SUMMARY) || dropped || gave_up) {
		char what[64] = "";
		if (s.cfg.kind == SEND_HTTP)
			snprintf(what, sizeof(what), "%llu samples, ", (unsigned long long)s.samples);
		fprintf(stderr, "strata: sent %llu window%s (%s%u process%s) to %s", (unsigned long long)s.sent,
			s.sent == 1 ? "" : "s", what, s.npids, s.npids == 1 ? "" : "es", s.url[0] ? s.url : "(nowhere)");
		if (dropped)
			fprintf(stderr, "; %llu dropped (more were waiting than --send-queue keeps)", (unsigned long long)dropped);
		if (gave_up)
			fprintf(stderr, "; %d not sent at the end: %s", gave_up, s.err);
		if (s.failed)
			fprintf(stderr, "; %llu refused", (unsigned long long)s.failed);
		fputc('\n', stderr);
	}
	http_free(s.http);
	send_cfg_free(&s.cfg);
	remove_dir(dir);
	close(lock);
	return gave_up || s.failed || bad ? 1 : 0;
}

int sender_files(const struct send_cfg *c, char **files, int n)
{
	struct sender s;
	memset(&s, 0, sizeof(s));
	s.cfg = *c;
	char err[1024];
	send_url_display(c->url, s.url, sizeof(s.url));
	if (c->kind == SEND_HTTP && !(s.http = http_new(&s.cfg, err, sizeof(err)))) {
		fprintf(stderr, "strata: %s\n", err);
		return 2;
	}
	int rc = 0;
	for (int i = 0; i < n; i++) {
		struct pb body = { 0 };
		uint64_t samples = 0;
		char msg[1024];
		int r = prepare(&s, files[i], (uint64_t)time(NULL) * 1000000000u, getpid(), &body, &samples, msg,
				sizeof(msg));
		if (r == HTTP_OK && c->kind == SEND_HTTP)
			r = http_post(s.http, body.d, body.len, msg, sizeof(msg));
		else if (r == HTTP_OK)
			msg[0] = 0;
		free(body.d);
		if (r != HTTP_OK) {
			fprintf(stderr, "strata: %s: %s\n", files[i], msg);
			rc = 1;
		} else {
			if (msg[0])
				fprintf(stderr, "strata: %s: %s\n", files[i], msg);
			fprintf(stderr, "strata: %s: %llu samples sent to %s\n", files[i], (unsigned long long)samples, s.url);
		}
	}
	http_free(s.http);
	return rc;
}
