/*
 * ctlclient.h — the CLI's side of the control channel (common/ctlproto.h
 * has the protocol): finding a process's socket, explaining why there is
 * none, and one request/reply. Used by `strata ctl`, `strata record --pid`
 * and `strata top`.
 */
#ifndef STRATA_CTLCLIENT_H
#define STRATA_CTLCLIENT_H

#include <stddef.h>
#include <sys/types.h>

/* The socket of process pid. Returns 0 with its path in out, or -1 with a
 * one-line reason in err that says what to do: no such process, started
 * without the agent (and how to start it with it), agent loaded but not
 * active, another user's process. */
int ctl_find(pid_t pid, char *out, size_t n, char *err, size_t errlen);

/* Sends `req` (with descriptor fd attached when fd >= 0) to process pid
 * and reads the reply into reply. Returns 0 if the agent answered "ok",
 * 1 if it answered with an error (err holds it, without "error: "), -1 if
 * the request could not be made (err says why; a stale socket of a dead
 * agent is removed). Nothing is sent unless the socket's directory and the
 * socket are the target owner's and private, and the listener is the
 * target process itself (SO_PEERCRED); otherwise err says what was found.
 * timeout_ms bounds the wait for the reply. */
int ctl_call(pid_t pid, const char *req, int fd, char *reply, size_t n, int timeout_ms, char *err, size_t errlen);

/* The value of key in an "ok" reply (empty string if absent); a static
 * buffer per call site is the caller's. */
const char *ctl_value(const char *reply, const char *key, char *out, size_t n);

/* "LD_PRELOAD=<dir>/libstrata-agent.so STRATA_AGENT=1": how to start a
 * program with an attachable agent (for messages). */
const char *ctl_howto(void);

#endif
