/*
 * spool.h — the directory through which windows of samples go from the
 * agent's helpers (strata-agentd, which cut them) to the sender
 * (`strata send --spool DIR`, which turns each into an OTLP profiles
 * request or a pprof file): docs/send.md. Shared by both sides so they
 * agree on names and locks.
 *
 *   config          what to send to and how: STRATA_SEND* lines
 *                   (KEY=VALUE, docs/send.md), mode 0600; written by
 *                   whoever made the directory (the CLI, or a helper
 *                   from its STRATA_SEND variables)
 *   w-T-PID.strata  a window: a complete .strata file (file header, a
 *                   session, one process stream) of process PID whose
 *                   window began at T (CLOCK_REALTIME ns, 20 digits, so
 *                   names sort by time). Written as .w-T-PID.tmp and
 *                   renamed when whole; the sender deletes it once sent
 *   writers.lock    every helper that cuts windows here holds a shared
 *                   flock on it (and so does the CLI that made the
 *                   directory, while it runs): when none does, the
 *                   sender sends what is left and leaves
 *   sender.lock     the sender holds an exclusive flock on it: a helper
 *                   that finds it free starts a sender
 *   status          the sender's counts (KEY=VALUE lines, replaced whole)
 *
 * Nothing here blocks: every lock is tried, never waited for.
 */
#ifndef STRATA_SPOOL_H
#define STRATA_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPOOL_CONFIG "config"
#define SPOOL_STATUS "status"
#define SPOOL_WRITERS "writers.lock"
#define SPOOL_SENDER "sender.lock"

/* dir/w-T-PID.strata, or with tmp dir/.w-T-PID.tmp. -1 if it does not fit. */
int spool_window_path(char *out, size_t n, const char *dir, uint64_t t_ns, pid_t pid, int tmp);
/* Whether `name` (no directory) is a published window; fills t and pid. */
int spool_window_parse(const char *name, uint64_t *t_ns, pid_t *pid);

/* Makes a new private spool directory under `base` (mode 0700):
 * base/send-PID-XXXXXX. Returns 0, or -1 with errno set. */
int spool_make(char *out, size_t n, const char *base, pid_t pid);

/* Takes a shared flock on dir/writers.lock, held as long as the returned
 * descriptor (close-on-exec) is open; -1 on failure. */
int spool_hold_writer(const char *dir);
/* Whether anyone holds writers.lock. */
int spool_has_writers(const char *dir);
/* Takes the exclusive flock on dir/sender.lock: the descriptor, or -1 if
 * another sender holds it (or the file cannot be opened). */
int spool_take_sender(const char *dir);
/* Whether a sender holds dir/sender.lock. */
int spool_sender_alive(const char *dir);

/* Reads `key` from a file of KEY=VALUE lines (the last one wins) into out.
 * Returns 0, or -1 if the file or the key is missing. */
int spool_kv_get(const char *path, const char *key, char *out, size_t n);

#endif
