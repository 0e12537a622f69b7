/*
 * otlp.h — the OpenTelemetry profiles signal (OTLP, profiles/v1development
 * as the Collector's core v0.165 reads it: docs/send.md): a profile model
 * as one ExportProfilesServiceRequest. The sender (`strata send`) posts
 * it; `strata convert -f otlp` writes it to a file.
 */
#ifndef STRATA_OTLP_H
#define STRATA_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/profile.h"
#include "pb.h"

struct otlp_opts {
	const char *service;        /* service.name; NULL: the script or module each process ran */
	const char *const *attrs;   /* extra resource attributes, "key=value" */
	uint32_t nattrs;
	int exclude_idle;           /* leave idle (wall-mode) samples out */
};

/* Encodes p into out (appended): one ResourceProfiles per process, one
 * Profile per recorded event, a shared dictionary. Returns 0, or -1 with
 * a one-line reason in err. */
int otlp_encode(const struct profile *p, const struct otlp_opts *o, struct pb *out, char *err, size_t errlen);

/* The default service.name of a process from its command line: the
 * module of `python -m mod`, else the script's name without .py, else the
 * program's ("python3" for -c). */
void otlp_service_name(const char *command, char *out, size_t n);

#endif
