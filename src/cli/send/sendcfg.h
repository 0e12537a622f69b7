/*
 * sendcfg.h — continuous profiling's settings (docs/send.md): where to
 * send, how, and as what, whichever way they are given:
 *
 *   - options of `strata record`, `strata ctl PID send` (--send URL,
 *     --every, --send-header, --send-ca, --service, --attr, ...), which
 *     the CLI checks and writes into a spool directory's config file;
 *   - STRATA_SEND* variables of a service started with the agent, which
 *     its helper copies into the config file as they are;
 *   - the config file, read by the sender (`strata send --spool DIR`).
 *
 * The config file holds the variables' form (KEY=VALUE lines), so the
 * three meet in one parser.
 */
#ifndef STRATA_SENDCFG_H
#define STRATA_SENDCFG_H

#include <stddef.h>
#include <stdint.h>

#define SEND_MAX_HEADERS 32
#define SEND_MAX_ATTRS 64

enum send_kind { SEND_HTTP = 0, SEND_FILE = 1 };

struct send_cfg {
	int set;                        /* a URL was given */
	int kind;                       /* enum send_kind */
	char url[4096];                 /* http(s): the full URL posted to; file: the directory */
	char *headers[SEND_MAX_HEADERS]; /* "Name: value", or "@FILE" (read by the sender) */
	unsigned nheaders;
	char ca[4096];                  /* --send-ca: a CA bundle instead of the system's */
	unsigned timeout_ms;            /* per request */
	int gzip;
	char service[256];              /* service.name ("" = the script or module) */
	char *attrs[SEND_MAX_ATTRS];    /* "key=value" */
	unsigned nattrs;
	unsigned every_ms;              /* the window (the helper's) */
	unsigned queue;                 /* windows kept per process while the collector lags */
	unsigned keep;                  /* file: pprof files kept */
};

void send_cfg_init(struct send_cfg *c);
void send_cfg_free(struct send_cfg *c);

/* One setting by its variable name (STRATA_SEND, STRATA_SEND_EVERY, ...).
 * Returns 0, 1 if the key is not one of ours, or -1 with err filled. */
int send_cfg_set(struct send_cfg *c, const char *key, const char *val, char *err, size_t errlen);

/* Reads a spool directory's config file. 0, or -1 with err filled. */
int send_cfg_load(struct send_cfg *c, const char *path, char *err, size_t errlen);

/* Command-line options of record and ctl send: their long names map to
 * the variables (--send -> STRATA_SEND, ...). Returns 0 if `name` is one
 * (applied, or -1 with err filled when its value is wrong), 1 if not. */
int send_cfg_option(struct send_cfg *c, const char *name, const char *val, char *err, size_t errlen);
/* The getopt_long entries for those options (flag NULL, val SEND_OPT_BASE + i). */
#define SEND_OPT_BASE 0x5e00
extern const struct send_optdef {
	const char *name;
	int has_arg;
} send_optdefs[];
extern const unsigned send_noptdefs;
/* The --help lines for them. */
extern const char send_options_help[];

/* Makes a spool directory for c (under the control channel's directory)
 * and writes its config (0600). Header values given as env:NAME are
 * resolved now, @FILE stays for the sender to read. 0, or -1 with err. */
int send_cfg_spool(const struct send_cfg *c, char *dir, size_t n, char *err, size_t errlen);

/* The headers as curl takes them ("Name: value"), @FILE read now. Returns
 * the count, or -1 with err filled; *out is malloc'ed strings. */
int send_cfg_headers(const struct send_cfg *c, char ***out, char *err, size_t errlen);

/* What a URL names, for messages (without userinfo or query). */
void send_url_display(const char *url, char *out, size_t n);

#endif
