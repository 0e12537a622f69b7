/*
 * fuzz_ctl.c — libFuzzer target for the control channel's messages
 * (docs/control.md): what the agent's helper reads from whoever connects
 * to a process's socket, and what the CLI reads back.
 *  - ctl_recv (src/common/ctlproto.c) over a real SOCK_SEQPACKET pair,
 *    with or without a descriptor attached, messages of any length;
 *  - the helper's request parser (ctl_parse_request, which
 *    src/agentd/control.c acts on): command, path, create, paused, rate,
 *    and sending's dir, send, every, queue, stop;
 *  - the CLI reading a reply (src/cli/attach/attach.c, included here for
 *    its static readers): every key of a status reply, and the check of
 *    a running agent's settings against the ones asked for.
 *
 * Input: u8 flags (1: a descriptor travels with the message), then the
 * message.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "common/ctlproto.h"

#include "../../src/cli/attach/attach.c"

static int sv[2] = { -1, -1 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		abort();
	/* The largest message must fit the socket's buffer. */
	int sz = 4 * CTL_MSG_MAX;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	return 0;
}

/* The descriptors this process has open: a received one must not leak. */
static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 256; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static const char *const keys[] = { "pid", "python", "mode", "rate", "events", "sampling", "samples", "dropped",
				    "threads", "loaded", "output", "native", "depth", "perfmap", "jitlines",
				    "period", "objects", "stream", "bytes", "path", "create", "paused", "send",
				    "dir", "every", "queue", "stop", "" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size };
	uint8_t flags = fin_u8(&in);
	if (in.n > 2 * CTL_MSG_MAX)
		return 0; /* bigger than the socket takes in one message */
	int before = open_fds();
	int pass = -1;
	if (flags & 1)
		pass = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (ctl_send(sv[0], (const char *)in.p, in.n, pass))
		abort();
	if (pass >= 0)
		close(pass);

	static char msg[CTL_MSG_MAX];
	int fd;
	long n = ctl_recv(sv[1], msg, sizeof(msg), &fd);
	if (n < 0) {
		/* Only a message too long for the buffer is refused, and its
		 * descriptor is closed. */
		FUZZ_CHECK(in.n >= sizeof(msg) && fd == -1);
	} else {
		FUZZ_CHECK((size_t)n == in.n && msg[n] == 0);
		FUZZ_CHECK((fd >= 0) == (pass >= 0));
		struct ctl_request r;
		char err[128];
		if (ctl_parse_request(msg, &r, err, sizeof(err)) == 0) {
			FUZZ_CHECK(r.cmd != CTL_ATTACH || r.rate <= CTL_RATE_MAX);
			FUZZ_CHECK(strlen(r.name) < sizeof(r.name) && strlen(r.path) < sizeof(r.path) &&
				   strlen(r.send_dir) < sizeof(r.send_dir));
			FUZZ_CHECK(!r.has_send || r.send_dir[0]);
		} else {
			FUZZ_CHECK(r.cmd == CTL_ATTACH && err[0]);
		}
		/* The same bytes as a reply the CLI reads. */
		char v[4096], have[600];
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			ctl_value(msg, keys[i], v, sizeof(v));
		ctl_value(msg, "rate", v, 1);
		describe(msg, have, sizeof(have));
		struct attach_want w = { .fixed = 1, .mode = flags & 2, .native = 1, .max_depth = 512,
					 .events = "cycles", .jit_lines = 1, .objects = 1 };
		check_want(1, msg, &w, err, sizeof(err));
	}
	if (fd >= 0)
		close(fd);
	FUZZ_CHECK(open_fds() == before);
	return 0;
}
