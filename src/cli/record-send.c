/*
 * record-send.c — `strata record --send` (docs/send.md): the spool
 * directory the command's processes leave their windows in, the sender
 * that takes them (a `strata send --spool` process of its own, out of the
 * terminal's process group so a Ctrl-C meant for the program does not cut
 * it short), and, with --pid, sending from a running agent with or
 * without a file. record.h's part of builtin-record.c.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"
#include "cli/attach/attach.h"
#include "cli/attach/ctlclient.h"
#include "common/ctlproto.h"
#include "common/spool.h"
#include "record.h"

extern char **environ;

int record_send_start(struct record_send *rs, char *err, size_t errlen)
{
	rs->hold = -1;
	rs->sender = 0;
	if (send_cfg_spool(&rs->cfg, rs->dir, sizeof(rs->dir), err, errlen))
		return -1;
	/* Ours until the recording ends: the sender waits for it, and for
	 * every helper that joins, before it leaves. */
	rs->hold = spool_hold_writer(rs->dir);
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	char *argv[] = { (char *)"strata", (char *)"send", (char *)"--spool", rs->dir,
			 rs->quiet ? NULL : (char *)"--summary", NULL };
	int rc = posix_spawn(&rs->sender, "/proc/self/exe", NULL, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	if (rc) {
		snprintf(err, errlen, "cannot start the sender: %s", strerror(rc));
		rs->sender = 0;
		return -1;
	}
	/* Ours must hold the directory before any helper looks for one (it
	 * would start another, whose messages go to the program's stderr). */
	for (int waited = 0; waited < 10000 && !spool_sender_alive(rs->dir); waited += 5) {
		if (waitpid(rs->sender, NULL, WNOHANG) == rs->sender) {
			rs->sender = 0;
			snprintf(err, errlen, "the sender did not start");
			return -1;
		}
		struct timespec ts = { 0, 5 * 1000000L };
		nanosleep(&ts, NULL);
	}
	snprintf(rs->opts, sizeof(rs->opts), ",send=%s,every=%u,queue=%u", rs->dir, rs->cfg.every_ms, rs->cfg.queue);
	snprintf(rs->keys, sizeof(rs->keys), "send=%s\nevery=%u\nqueue=%u\n", rs->dir, rs->cfg.every_ms, rs->cfg.queue);
	return 0;
}

int record_send_pid(struct record_send *rs, pid_t pid, const char *options, char *err, size_t errlen)
{
	if (attach_ensure_agent(pid, 0, options, err, errlen))
		return -1;
	char req[1024], reply[CTL_MSG_MAX];
	snprintf(req, sizeof(req), "send\ndir=%s\nevery=%u\nqueue=%u\n", rs->dir, rs->cfg.every_ms, rs->cfg.queue);
	return ctl_call(pid, req, -1, reply, sizeof(reply), 10000, err, errlen) ? -1 : 0;
}

int record_send_pid_stop(pid_t pid, char *err, size_t errlen)
{
	char reply[CTL_MSG_MAX];
	if (!attach_alive(pid))
		return 0;
	int rc = ctl_call(pid, "send\nstop=1\n", -1, reply, sizeof(reply), 10000, err, errlen);
	return rc && attach_alive(pid) ? -1 : 0;
}

void record_send_finish(struct record_send *rs)
{
	if (rs->hold >= 0)
		close(rs->hold);
	rs->hold = -1;
	if (rs->sender <= 0)
		return;
	/* The last windows go out once the helpers are done: allow one
	 * request's time and a little more. A process still running (a
	 * daemon the command started) keeps its sender going after us. */
	unsigned limit = rs->cfg.timeout_ms + 5000;
	for (unsigned waited = 0; waited < limit; waited += 50) {
		if (waitpid(rs->sender, NULL, WNOHANG) == rs->sender) {
			rs->sender = 0;
			return;
		}
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
	warnf("the sender (process %d) goes on for the processes still sending through it", (int)rs->sender);
}
