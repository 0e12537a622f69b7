/*
 * ctlproto.h — the control channel between a running agent and the CLI
 * (docs/control.md): where a process's socket lives, and how one request
 * and its reply travel. Shared by the agent (src/agentd/control.c, the
 * server) and the CLI (src/lib/ctlclient.c).
 *
 * Location: $XDG_RUNTIME_DIR/strata/PID.sock when XDG_RUNTIME_DIR names a
 * directory owned by the process's user, else /tmp/strata-UID/PID.sock.
 * The directory is 0700 and the socket 0600; the agent also checks every
 * peer's uid with SO_PEERCRED, and the CLI checks the listener's pid and
 * uid the same way before it sends anything.
 *
 * Framing: a SOCK_SEQPACKET connection carries one request and one reply,
 * each a single message of at most CTL_MSG_MAX bytes. A message is text
 * lines: the first is the command (request) or "ok" / "error: reason"
 * (reply); the others are key=value, the value running to the end of the
 * line (so paths may contain spaces). A request may carry one descriptor
 * (SCM_RIGHTS): the output for `attach`, the destination for `dump`.
 */
#ifndef STRATA_CTLPROTO_H
#define STRATA_CTLPROTO_H

#include <stddef.h>
#include <sys/types.h>

#define CTL_MSG_MAX 8192

/* The socket directory for a process of user `uid` whose XDG_RUNTIME_DIR
 * is `xdg` (NULL or "" if unset). Writes it to out; returns 0, or -1 if it
 * does not fit. Nothing is created. */
int ctl_sock_dir(char *out, size_t n, const char *xdg, uid_t uid);

/* dir/PID.sock; -1 if it does not fit a sockaddr_un. */
int ctl_sock_path(char *out, size_t n, const char *dir, pid_t pid);

/* Makes sure `dir` exists, is a real directory (not a symlink) owned by
 * the calling user, with no access for group or others (tightening the
 * mode of our own directory if needed). Returns 0, or -1 with errno set
 * (EPERM: it belongs to someone else or cannot be made private). */
int ctl_prepare_dir(const char *dir);

/* Sends one message, with descriptor fd attached when fd >= 0. Returns 0
 * or -1 (errno set). */
int ctl_send(int sock, const char *msg, size_t len, int fd);

/* Receives one message into buf (NUL-terminated, so at most n-1 bytes);
 * *fd receives an attached descriptor or -1 (any further descriptors are
 * closed). Returns the length, or -1 (errno set; EMSGSIZE if the message
 * did not fit). */
long ctl_recv(int sock, char *buf, size_t n, int *fd);

/* The value of `key` in a message's key=value lines, copied to out.
 * Returns out, or NULL if the key is absent (out is then ""). */
const char *ctl_get(const char *msg, const char *key, char *out, size_t n);

/* A request as the agent's control thread (src/agentd/control.c) acts on
 * it: the command of the first line and, for attach, its arguments.
 * Parsed apart from acting on it so that it is tested (and fuzzed) on
 * its own: the bytes come from whoever connected. */
enum ctl_cmd {
	CTL_UNKNOWN = 0, CTL_STATUS, CTL_START, CTL_STOP, CTL_ATTACH, CTL_DETACH, CTL_DUMP, CTL_FLUSH, CTL_SEND,
};
#define CTL_RATE_MAX 100000
struct ctl_request {
	enum ctl_cmd cmd;
	char name[32];         /* the first line (cut), for the error of an unknown one */
	/* attach */
	char path[4096];       /* path=P, "" if absent */
	int has_path;
	int create, paused;    /* create=1, paused=1 */
	unsigned rate;         /* rate=HZ, 1..CTL_RATE_MAX; 0: keep the agent's */
	/* send (dir=D) and attach (send=D): windows to the spool D */
	char send_dir[512];
	int has_send;          /* the key is there and not empty */
	unsigned every, queue; /* every=MS (default 15000), queue=N (default 8);
	                        * 0 when not a number (the sender's defaults) */
	int send_stop;         /* send: stop=... */
};

/* Parses `msg` (a NUL-terminated request). Returns 0, or -1 with the
 * reason in err (a rate that is not a number in range): the reply's
 * "error: " line. An unknown command is not an error here (cmd is
 * CTL_UNKNOWN, name says what was asked). */
int ctl_parse_request(const char *msg, struct ctl_request *r, char *err, size_t errlen);

#endif
