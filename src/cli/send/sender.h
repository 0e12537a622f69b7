/*
 * sender.h — continuous profiling, the sending side (docs/send.md): a
 * process of its own (`strata send --spool DIR`, started by `strata
 * record --send` or by an agent's helper), never the profiled program.
 * It takes the windows the helpers leave in the spool directory
 * (common/spool.h), loads each into the profile model (symbolizing
 * native and JIT frames like any strata command), and posts it as an
 * OTLP profiles request (http.c) or writes it as a pprof file.
 *
 *   sender.c   the spool loop: order, retries with backoff, the status
 *              file, the end
 *   http.c     libcurl
 *   sendcfg.c  the settings (sendcfg.h)
 */
#ifndef STRATA_SENDER_H
#define STRATA_SENDER_H

#include <stddef.h>

#include "sendcfg.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

enum { HTTP_OK = 0, HTTP_RETRY = 1, HTTP_REJECTED = 2 };
struct http;
struct http *http_new(const struct send_cfg *c, char *err, size_t errlen);
/* Posts body (protobuf); HTTP_OK (msg may tell of a partial success),
 * HTTP_RETRY (connection, timeout, 408, 429, 5xx) or HTTP_REJECTED, with
 * msg saying why. */
int http_post(struct http *h, const void *body, size_t len, char *msg, size_t mn);
void http_free(struct http *h);

enum sender_flags {
	SENDER_SUMMARY = 1 << 0, /* one line on stderr at the end (strata record) */
};

/* Serves the spool directory until no helper holds it and no window is
 * left (or SIGTERM), then removes it. Returns an exit status. */
int sender_run(const char *dir, int flags);

/* Sends the .strata files given, each as one request (or pprof file):
 * `strata send FILE... --send URL`. Returns an exit status. */
int sender_files(const struct send_cfg *c, char **files, int n);

#endif
