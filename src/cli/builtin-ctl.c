/*
 * builtin-ctl.c — `strata ctl PID COMMAND`: talks to the agent of a running
 * process over its control channel (docs/control.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "common/ctlproto.h"
#include "cli/attach/attach.h"
#include "cli/attach/ctlclient.h"
#include "cli/send/sendcfg.h"
#include "common/spool.h"

static const char usage_text[] =
	"usage: strata ctl PID COMMAND\n"
	"\n"
	"Controls the strata agent in a running process (one started by strata record,\n"
	"or with the agent preloaded and STRATA_AGENT=1, or loaded later by 'load',\n"
	"record --pid or top --pid; see docs/control.md).\n"
	"\n"
	"commands:\n"
	"  status       the agent's state: sampling on/off, samples, dropped, threads,\n"
	"               output\n"
	"  start        turn sampling on\n"
	"  stop         turn sampling off (a stopped agent takes no samples and no\n"
	"               signals)\n"
	"  dump FILE    write what was recorded so far to FILE, as a finished profile\n"
	"  detach       end the recording: the process runs on, sampling off, with no\n"
	"               output until something attaches again\n"
	"  load         load the agent into a Python process started without it\n"
	"               (ptrace; docs/attach.md), in standby: sampling off, no output\n"
	"  send URL [OPTIONS]  send the profile every few seconds, as strata record\n"
	"               --send does (docs/send.md; the options below), until\n"
	"  send stop    ends it\n"
	"\n"
	"Only the process's own user may control it.\n";

/* `send URL [options]`: a spool directory with the settings, named to
 * the agent, whose helper starts the sender (docs/send.md). */
static int ctl_send_cmd(pid_t pid, int argc, char **argv, char *reply, size_t rn, char *err, size_t errlen)
{
	struct send_cfg c;
	send_cfg_init(&c);
	struct option lo[32];
	unsigned n = 0;
	for (unsigned i = 0; i < send_noptdefs; i++)
		lo[n++] = (struct option){ send_optdefs[i].name, send_optdefs[i].has_arg ? required_argument : no_argument, 0,
					   SEND_OPT_BASE + (int)i };
	lo[n] = (struct option){ 0, 0, 0, 0 };
	/* argv[0] is the URL: options follow it. */
	if (send_cfg_option(&c, "send", argv[0], err, errlen))
		return -1;
	optind = 1;
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (o < SEND_OPT_BASE || o >= SEND_OPT_BASE + (int)send_noptdefs) {
			fputs(send_options_help, stderr);
			snprintf(err, errlen, "unknown option for send");
			return -1;
		}
		if (send_cfg_option(&c, send_optdefs[o - SEND_OPT_BASE].name, optarg ? optarg : "", err, errlen))
			return -1;
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected '%s' after send URL", argv[optind]);
		return -1;
	}
	char dir[512], req[1024];
	if (send_cfg_spool(&c, dir, sizeof(dir), err, errlen))
		return -1;
	snprintf(req, sizeof(req), "send\ndir=%s\nevery=%u\nqueue=%u\n", dir, c.every_ms, c.queue);
	int rc = ctl_call(pid, req, -1, reply, rn, 10000, err, errlen);
	if (rc) {
		/* Nobody took it: the directory goes. */
		char p[1024];
		snprintf(p, sizeof(p), "%s/%s", dir, SPOOL_CONFIG);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s", dir, SPOOL_WRITERS);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s", dir, SPOOL_SENDER);
		unlink(p);
		rmdir(dir);
	} else {
		char disp[4096];
		send_url_display(c.url, disp, sizeof(disp));
		printf("strata: process %d: sending its profile to %s every %g s\n", (int)pid, disp, c.every_ms / 1000.0);
	}
	send_cfg_free(&c);
	return rc;
}

static int parse_pid(const char *s, pid_t *pid)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v <= 0 || v > 0x7fffffff)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

/* "key=value" lines of a reply as "key: value", aligned. */
static void print_reply(const char *reply)
{
	const char *p = strchr(reply, '\n');
	while (p && *++p) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		const char *eq = memchr(p, '=', ll);
		if (eq)
			printf("%-9.*s %.*s\n", (int)(eq - p), p, (int)(ll - (size_t)(eq - p) - 1), eq + 1);
		p = nl;
	}
}

int cmd_ctl(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(usage_text, stdout);
		fputs(send_options_help, stdout);
		return 0;
	}
	if (argc < 3)
		die_usage(usage_text);
	pid_t pid;
	if (parse_pid(argv[1], &pid)) {
		errorf("'%s' is not a process id", argv[1]);
		return 2;
	}
	const char *cmd = argv[2];
	char reply[CTL_MSG_MAX], err[1024];
	int rc;
	if (!strcmp(cmd, "status") || !strcmp(cmd, "start") || !strcmp(cmd, "stop") || !strcmp(cmd, "detach") ||
	    !strcmp(cmd, "flush")) {
		if (argc != 3)
			die_usage(usage_text);
		rc = ctl_call(pid, cmd, -1, reply, sizeof(reply), 10000, err, sizeof(err));
		if (rc == 0 && !strcmp(cmd, "status"))
			print_reply(reply);
		else if (rc == 0 && strcmp(cmd, "flush"))
			printf("strata: process %d: sampling %s%s\n", (int)pid, !strcmp(cmd, "start") ? "on" : "off",
			       !strcmp(cmd, "detach") ? ", output closed" : "");
	} else if (!strcmp(cmd, "load")) {
		/* Into a Python process started without the agent
		 * (docs/attach.md); nothing to do where one runs. */
		if (argc != 3)
			die_usage(usage_text);
		char sock[108];
		int had = ctl_find(pid, sock, sizeof(sock), err, sizeof(err)) == 0;
		rc = attach_ensure_agent(pid, 0, NULL, err, sizeof(err)) ? -1 : 0;
		if (rc == 0)
			printf("strata: process %d: %s, sampling off, no output until something attaches\n", (int)pid,
			       had ? "the agent was already running" : "agent loaded");
	} else if (!strcmp(cmd, "dump")) {
		if (argc != 4)
			die_usage(usage_text);
		const char *file = argv[3];
		int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			errorf("cannot write %s: %s", file, strerror(errno));
			return 2;
		}
		/* The agent writes through our descriptor: the file is made
		 * here, by us, relative to our directory. */
		rc = ctl_call(pid, "dump", fd, reply, sizeof(reply), 120000, err, sizeof(err));
		close(fd);
		if (rc == 0) {
			char b[32];
			printf("strata: process %d: wrote %s bytes to %s\n", (int)pid, ctl_value(reply, "bytes", b, sizeof(b)),
			       file);
		} else {
			unlink(file);
		}
	} else if (!strcmp(cmd, "send")) {
		if (argc < 4)
			die_usage(usage_text);
		if (!strcmp(argv[3], "stop")) {
			if (argc != 4)
				die_usage(usage_text);
			rc = ctl_call(pid, "send\nstop=1\n", -1, reply, sizeof(reply), 10000, err, sizeof(err));
			if (rc == 0)
				printf("strata: process %d: sending stopped\n", (int)pid);
		} else {
			rc = ctl_send_cmd(pid, argc - 3, argv + 3, reply, sizeof(reply), err, sizeof(err));
		}
	} else {
		errorf("unknown ctl command '%s'", cmd);
		die_usage(usage_text);
	}
	if (rc) {
		errorf("%s", err);
		return rc < 0 ? 2 : 1;
	}
	return 0;
}
