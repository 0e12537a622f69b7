/*
 * record.h — what builtin-record.c shares with record-send.c: `strata
 * record --send`, continuous profiling (docs/send.md).
 */
#ifndef STRATA_RECORD_H
#define STRATA_RECORD_H

#include <sys/types.h>

#include "cli/send/sendcfg.h"

struct record_send {
	struct send_cfg cfg;
	char dir[512];          /* the spool directory */
	int hold;               /* our hold on it (writers.lock) */
	pid_t sender;
	int quiet;              /* -q: no summary line from the sender */
	char opts[700];         /* for the agent's options: ",send=DIR,every=MS,queue=N" */
	char keys[700];         /* for an attach request: send=, every=, queue= lines */
};

/* Makes the spool directory and starts its sender. 0, or -1 with err. */
int record_send_start(struct record_send *rs, char *err, size_t errlen);
/* --pid without a file: the agent (loaded with options if need be) sends
 * through the spool until record_send_pid_stop. */
int record_send_pid(struct record_send *rs, pid_t pid, const char *options, char *err, size_t errlen);
int record_send_pid_stop(pid_t pid, char *err, size_t errlen);
/* The recording is over: lets go of the spool and waits (bounded) for the
 * sender's last requests and summary line. */
void record_send_finish(struct record_send *rs);

#endif
