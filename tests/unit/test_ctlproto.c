/*
 * test_ctlproto.c — the control channel's messages (src/common/ctlproto.c):
 * the requests the helper acts on (ctl_parse_request) as strata and the
 * Python module send them, and the ones it must refuse, and the key=value
 * lookup both sides use.
 */
#include "test.h"
#include "../../src/common/ctlproto.h"

static void requests(void)
{
	struct ctl_request r;
	char err[128];
	CHECK_EQ(ctl_parse_request("status\n", &r, err, sizeof(err)), 0);
	CHECK_EQ(r.cmd, CTL_STATUS);
	CHECK_EQ(ctl_parse_request("stop", &r, err, sizeof(err)), 0);
	CHECK_EQ(r.cmd, CTL_STOP);
	/* strata record --pid's attach (attach.c), then the Python module's. */
	CHECK_EQ(ctl_parse_request("attach\npath=/tmp/a b.strata\npaused=1\nrate=250\n", &r, err, sizeof(err)), 0);
	CHECK_EQ(r.cmd, CTL_ATTACH);
	CHECK_STR(r.path, "/tmp/a b.strata");
	CHECK(r.has_path && r.paused && !r.create);
	CHECK_EQ(r.rate, 250);
	CHECK_EQ(ctl_parse_request("attach\ncreate=1\npath=x.strata\n", &r, err, sizeof(err)), 0);
	CHECK(r.create && !r.paused && r.rate == 0);
	CHECK_EQ(ctl_parse_request("attach\n", &r, err, sizeof(err)), 0);
	CHECK(!r.has_path && r.path[0] == 0);
	/* An unknown command is named back, cut to its buffer. */
	CHECK_EQ(ctl_parse_request("frobnicate-everything-in-this-process-now\nrate=x\n", &r, err, sizeof(err)), 0);
	CHECK_EQ(r.cmd, CTL_UNKNOWN);
	CHECK_STR(r.name, "frobnicate-everything-in-this-p");
	/* Rates: digits in 1..100000 only (strtoul wrapped "-1" and
	 * 4294967396 into valid ones). */
	static const char *const bad[] = { "0", "100001", "-1", "4294967396", "12a", "", " 5", "+5" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char req[64];
		snprintf(req, sizeof(req), "attach\nrate=%s\n", bad[i]);
		CHECK_EQ(ctl_parse_request(req, &r, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "out of range");
	}
	CHECK_EQ(ctl_parse_request("attach\nrate=100000\n", &r, err, sizeof(err)), 0);
	CHECK_EQ(r.rate, 100000);
	/* Sending: strata ctl PID send, record --send's attach. */
	CHECK_EQ(ctl_parse_request("send\ndir=/tmp/spool\nevery=5000\nqueue=4\n", &r, err, sizeof(err)), 0);
	CHECK(r.cmd == CTL_SEND && r.has_send && !r.send_stop);
	CHECK_STR(r.send_dir, "/tmp/spool");
	CHECK(r.every == 5000 && r.queue == 4);
	CHECK_EQ(ctl_parse_request("send\nstop=1\n", &r, err, sizeof(err)), 0);
	CHECK(r.send_stop && !r.has_send);
	CHECK_EQ(ctl_parse_request("attach\npath=x\nsend=/s\n", &r, err, sizeof(err)), 0);
	CHECK(r.has_send && r.every == 15000 && r.queue == 8);
	CHECK_EQ(ctl_parse_request("send\ndir=\nevery=-5\nqueue=99999999999\n", &r, err, sizeof(err)), 0);
	CHECK(!r.has_send && r.every == 0 && r.queue == 0); /* the sender's defaults */
}

static void values(void)
{
	char v[8];
	const char *reply = "ok\npid=12\npython=3.11.2\noutput=/tmp/a long path\n";
	CHECK_STR(ctl_get(reply, "pid", v, sizeof(v)), "12");
	CHECK_STR(ctl_get(reply, "output", v, sizeof(v)), "/tmp/a "); /* cut to the buffer */
	CHECK(ctl_get(reply, "ok", v, sizeof(v)) == NULL && v[0] == 0); /* the first line is no key */
	CHECK(ctl_get(reply, "py", v, sizeof(v)) == NULL);
	CHECK(ctl_get("status", "pid", v, sizeof(v)) == NULL);
}

int main(void)
{
	RUN(requests);
	RUN(values);
	return test_summary();
}
