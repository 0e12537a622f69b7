/*
 * builtin-record.c — `strata record`: run a command with the agent
 * injected, wait for it, and summarise what was recorded.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/attach/attach.h"
#include "builtin.h"
#include "record.h"
#include "common/format.h"
#include "lib/launch.h"
#include "lib/reader.h"
#include "lib/profile.h"
#include "export/export.h"


static const char usage_text[] =
	"usage: strata record [options] -- COMMAND [ARGS...]\n"
	"       strata record --pid PID [-d SECONDS] [options]\n"
	"\n"
	"Runs COMMAND with the strata agent preloaded and records a profile of every\n"
	"Python process it starts (children too). Exits with COMMAND's exit status.\n"
	"With --pid, records a running Python process (the agent is loaded into one\n"
	"started without it: docs/attach.md, docs/control.md) until SECONDS have\n"
	"passed, Ctrl-C, or the process ends.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE    write the profile to FILE (default: strata.out, or\n"
	"                       strata.EXT with -f)\n"
	"  -f, --format FORMAT  convert the profile to FORMAT when the command ends\n"
	"                       and write that to FILE (see strata convert --help)\n"
	"      --raw FILE       with -f: also keep the .strata profile in FILE\n"
	"  -F, --freq HZ        samples per second per thread (default: 1000)\n"
	"  -e, --event LIST     sample on perf events instead of CPU time: the first\n"
	"                       event drives sampling, all are counted per line\n"
	"                       ('-e list' shows them; see docs/events.md)\n"
	"  -c, --period N       with -e: a sample every N occurrences of the first\n"
	"                       event (default depends on the event)\n"
	"      --mode MODE      cpu: sample each thread by its own CPU time (default)\n"
	"                       wall: sample every thread by wall-clock time, marking\n"
	"                       samples of blocked threads as idle\n"
	"      --max-depth N    Python frames kept per sample (default: 512); deeper\n"
	"                       stacks keep their innermost N frames\n"
	"      --paused         start with sampling off; 'strata ctl PID start' turns it on\n"
	"                       (docs/control.md)\n"
	"  -p, --pid PID        attach to running Python process PID instead of running a\n"
	"                       command; the agent is loaded with the options given,\n"
	"                       fixed from then on (docs/attach.md)\n"
	"  -d, --duration SECS  with --pid: stop after SECS seconds (default: until Ctrl-C\n"
	"                       or the process ends)\n"
	"      --native         record native (C/C++) frames too, merged with the Python\n"
	"                       frames that called them (see docs/native.md)\n"
	"      --perf-map       for Linux perf: write /tmp/perf-PID.map lines and a\n"
	"                       jitdump (jit-PID.dump in $STRATA_JITDUMP_DIR or\n"
	"                       ~/.debug/jit) for JIT code (see docs/perf.md)\n"
	"      --jit-lines      attribute Numba-compiled code to its Python source lines\n"
	"                       (runs the command with NUMBA_DEBUGINFO=1; docs/jit.md)\n"
	"      --objects        sample allocations too: events alloc-objects, alloc-bytes,\n"
	"                       live-objects, live-bytes by type and line (docs/objects.md)\n"
	"      --objects-rate BYTES  with --objects: one sample per BYTES allocated on\n"
	"                       average (default: 524288)\n"
	"  -q, --quiet          do not print the summary line\n"
	"  -h, --help           show this help\n"
	"\n"
	"With --send and no -o, nothing is written to a file: the windows are only sent.\n";

struct summary {
	uint64_t samples, dropped;
	unsigned processes, unsupported, refused, threads, not_profiled;
	char unsupported_versions[256];
	/* (pid, tid) of the threads counted: with --send a process's stream
	 * starts over at every window and announces its threads again. */
	uint64_t *seen;
	size_t nseen, capseen;
	/* What the agents could not do (REC_NOTE), one line each, with
	 * their process; a few, then a count. */
	char notes[8][400];
	unsigned nnotes, more_notes;
	int first_not_profiled;      /* index in notes of a process that was not profiled, or -1 */
};

/* Whether thread (pid, tid) is counted already (else it is now). */
static int thread_seen(struct summary *s, uint32_t pid, uint32_t tid)
{
	uint64_t k = (uint64_t)pid << 32 | tid;
	for (size_t i = 0; i < s->nseen; i++)
		if (s->seen[i] == k)
			return 1;
	if (s->nseen == s->capseen) {
		size_t cap = s->capseen ? s->capseen * 2 : 64;
		uint64_t *n = realloc(s->seen, cap * sizeof(*n));
		if (!n)
			return 0;
		s->seen = n;
		s->capseen = cap;
	}
	s->seen[s->nseen++] = k;
	return 0;
}

static int count_record(void *ctx, struct reader_stream *st, uint64_t type, struct rbuf *body)
{
	struct summary *s = ctx;
	switch (type) {
	case REC_PROCESS: {
		struct rec_process p;
		if (rec_get_process(body, &p) == 0) {
			if (p.flags & PROC_NOT_PROFILED) {
				s->not_profiled++;
			} else if (p.flags & PROC_UNSUPPORTED) {
				s->unsupported++;
				if (p.flags & PROC_REFUSED)
					s->refused++;
				size_t l = strlen(s->unsupported_versions);
				if (!strstr(s->unsupported_versions, p.python_version) && l + 32 < sizeof(s->unsupported_versions))
					snprintf(s->unsupported_versions + l, sizeof(s->unsupported_versions) - l, "%s%s",
						 l ? ", " : "", p.python_version);
			} else if (!(p.flags & PROC_CONTINUED)) {
				s->processes++;
			}
			rec_free_process(&p);
		}
		break;
	}
	case REC_THREAD: {
		struct rec_thread t;
		if (rec_get_thread(body, &t) == 0) {
			if (!thread_seen(s, st->pid, t.tid))
				s->threads++;
			rec_free_thread(&t);
		}
		break;
	}
	case REC_SAMPLE: {
		struct rec_sample smp;
		if (rec_get_sample(body, &smp) == 0)
			s->samples += smp.weight;
		break;
	}
	case REC_DROPPED: {
		struct rec_dropped d;
		if (rec_get_dropped(body, &d) == 0)
			s->dropped += d.count;
		break;
	}
	case REC_NOTE: {
		struct rec_note n;
		if (rec_get_note(body, &n) == 0) {
			if (s->nnotes < sizeof(s->notes) / sizeof(s->notes[0])) {
				if (n.kind == NOTE_NOT_PROFILED && s->first_not_profiled < 0)
					s->first_not_profiled = (int)s->nnotes;
				snprintf(s->notes[s->nnotes++], sizeof(s->notes[0]), "process %u: %s", st ? st->pid : 0,
					 n.text);
			} else {
				s->more_notes++;
			}
			rec_free_note(&n);
		}
		break;
	}
	}
	return 0;
}

/* A process that exists and is not a zombie. */
static int pid_alive(uint32_t pid)
{
	return attach_alive((pid_t)pid);
}

/* Processes the command started may outlive it (a multiprocessing
 * forkserver or resource tracker, a daemon), and the helper of a process
 * that died ends its stream a moment after it: wait for those, at most
 * `ms` milliseconds. A stream still open after that belongs to a process
 * that is still running, and the warnings name it. */
static void wait_for_stragglers(const char *path, int ms, pid_t child)
{
	/* Once a process that outlived the command was seen writing, a
	 * moment of none is not the end: between a daemon's two forks the
	 * middle process may be gone before the last one's helper runs. */
	int others = 0, quiet_ms = 0;
	for (int waited = 0; waited < ms; waited += 50) {
		char err[256];
		struct reader *r = reader_open(path, err, sizeof(err));
		if (!r)
			return;
		/* The command's own helper, even before its first chunk: a
		 * process killed by a signal a moment after it started may
		 * end before its helper wrote anything (seen under load). */
		int pending = child > 0 && agent_helper_alive(child);
		pid_t writers[1];
		int nw = agent_helpers_writing(path, writers, 1);
		others |= nw > 0;
		pending += nw;
		/* A helper of a process that has ended, still writing that
		 * process's last chunks: its stream may not even be in the
		 * file yet (a pool worker killed as it started), so neither
		 * the streams nor the live processes show it. */
		pending += agent_helpers_finishing(path);
		if (reader_poll(r, 1, NULL, NULL, err, sizeof(err)) == 0) {
			size_t n;
			const struct reader_stream *st = reader_streams(r, &n);
			for (size_t i = 0; i < n; i++)
				if (!st[i].ended && st[i].pid &&
				    (pid_alive(st[i].pid) || agent_helper_alive((pid_t)st[i].pid)))
					pending++;
		}
		reader_close(r);
		quiet_ms = pending ? 0 : quiet_ms + 50;
		if (!pending && (!others || quiet_ms > 300))
			return;
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static volatile sig_atomic_t attach_stop;

static void on_stop_signal(int sig)
{
	(void)sig;
	attach_stop = 1;
}

/* With --pid: until the duration passes, Ctrl-C (or SIGTERM/SIGHUP), or
 * the process ends, and with it the processes it forked that record into
 * the same file (a daemon it became: python-daemon's DaemonContext forks
 * twice, and the process attached to is the first to exit). */
static void wait_attached(pid_t pid, double duration, const char *output, int quiet)
{
	struct sigaction sa, old[3];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	uint64_t end = duration > 0 ? monotonic_ns() + (uint64_t)(duration * 1e9) : 0;
	int told = 0;
	uint64_t none_since = 0;
	for (;;) {
		if (attach_stop || (end && monotonic_ns() >= end))
			break;
		if (!attach_alive(pid)) {
			pid_t w[16];
			int n = output ? agent_helpers_writing(output, w, 16) : 0;
			if (!output)
				break;
			/* Two seconds' grace: between a daemon's two forks the
			 * middle process may be gone before the last one's
			 * helper has started, which takes longer on a busy
			 * machine (over half a second was seen). */
			if (!n) {
				uint64_t now = monotonic_ns();
				if (!none_since)
					none_since = now;
				if (now - none_since >= 2000000000ull)
					break;
			} else {
				none_since = 0;
			}
			if (!n)
				goto next;
			if (!told && !quiet)
				fprintf(stderr, "strata: process %d ended; recording the %d process%s it started until %s; "
					"Ctrl-C to stop\n", (int)pid, n, n == 1 ? "" : "es", n == 1 ? "it ends" : "they end");
			told = 1;
		}
	next:;
		uint64_t left = end ? end - monotonic_ns() : 100000000;
		if (left > 100000000 || left == 0)
			left = 100000000;
		struct timespec ts = { 0, (long)left };
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
}

int cmd_record(int argc, char **argv)
{
	struct launch_opts o = { .output = "strata.out", .mode = MODE_CPU, .rate_hz = 1000, .max_depth = 512 };
	int quiet = 0, rate_given = 0;
	const char *format = NULL, *raw = NULL, *output = NULL, *events = NULL, *period = NULL;
	static const struct option base_opts[] = {
		{ "output", required_argument, 0, 'o' },
		{ "format", required_argument, 0, 'f' },
		{ "raw", required_argument, 0, 'R' },
		{ "freq", required_argument, 0, 'F' },
		{ "event", required_argument, 0, 'e' },
		{ "period", required_argument, 0, 'c' },
		{ "mode", required_argument, 0, 'm' },
		{ "max-depth", required_argument, 0, 'D' },
		{ "paused", no_argument, 0, 'P' },
		{ "native", no_argument, 0, 'N' },
		{ "perf-map", no_argument, 0, 'M' },
		{ "jit-lines", no_argument, 0, 'J' },
		{ "objects", no_argument, 0, 'O' },
		{ "objects-rate", required_argument, 0, 'B' },
		{ "quiet", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' },
		{ "pid", required_argument, 0, 'p' },
		{ "duration", required_argument, 0, 'd' },
	};
	/* And continuous profiling's (--send ...: cli/send/sendcfg.h). */
	struct option longopts[sizeof(base_opts) / sizeof(base_opts[0]) + 32];
	size_t nlo = sizeof(base_opts) / sizeof(base_opts[0]);
	memcpy(longopts, base_opts, sizeof(base_opts));
	for (unsigned i = 0; i < send_noptdefs; i++)
		longopts[nlo++] = (struct option){ send_optdefs[i].name,
						   send_optdefs[i].has_arg ? required_argument : no_argument, 0,
						   SEND_OPT_BASE + (int)i };
	longopts[nlo] = (struct option){ 0, 0, 0, 0 };
	static struct record_send rs;
	send_cfg_init(&rs.cfg);
	char serr[1024];
	int c;
	unsigned pid = 0;
	double duration = 0;
	int set_fixed = 0;
	/* '+': stop at the first non-option, which begins the command. */
	while ((c = getopt_long(argc, argv, "+o:F:f:e:c:qhp:d:", longopts, NULL)) != -1) {
		if (c >= SEND_OPT_BASE && c < SEND_OPT_BASE + (int)send_noptdefs) {
			if (send_cfg_option(&rs.cfg, send_optdefs[c - SEND_OPT_BASE].name, optarg ? optarg : "", serr,
					    sizeof(serr))) {
				errorf("%s", serr);
				return 2;
			}
			continue;
		}
		switch (c) {
		case 'p':
			if (parse_u32(optarg, 1, 0x7fffffff, &pid)) {
				errorf("invalid --pid '%s': expected a process id", optarg);
				return 2;
			}
			break;
		case 'd': {
			char *end;
			duration = strtod(optarg, &end);
			if (!*optarg || *end || !(duration > 0) || duration > 1e7) {
				errorf("invalid --duration '%s': expected a number of seconds", optarg);
				return 2;
			}
			break;
		}
		case 'o':
			output = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 'R':
			raw = optarg;
			break;
		case 'F':
			if (parse_u32(optarg, 1, 100000, &o.rate_hz)) {
				errorf("invalid frequency '%s': expected 1..100000 samples per second", optarg);
				return 2;
			}
			rate_given = 1;
			break;
		case 'e':
			if (!strcmp(optarg, "list")) {
				record_events_list(stdout);
				return 0;
			}
			events = optarg;
			break;
		case 'c':
			period = optarg;
			break;
		case 'm':
			set_fixed = 1;
			if (!strcmp(optarg, "cpu"))
				o.mode = MODE_CPU;
			else if (!strcmp(optarg, "wall"))
				o.mode = MODE_WALL;
			else {
				errorf("invalid mode '%s': expected cpu or wall", optarg);
				return 2;
			}
			break;
		case 'D':
			set_fixed = 1;
			if (parse_u32(optarg, 1, 4096, &o.max_depth)) {
				errorf("invalid --max-depth '%s': expected 1..4096", optarg);
				return 2;
			}
			break;
		case 'P':
			o.paused = 1;
			break;
		case 'N':
			o.native = 1;
			set_fixed = 1;
			break;
		case 'M':
			o.perf_map = 1;
			set_fixed = 1;
			break;
		case 'J':
			o.jit_lines = 1;
			break;
		case 'O':
			if (!o.objects_rate)
				o.objects_rate = OBJECTS_DEFAULT_RATE;
			set_fixed = 1;
			break;
		case 'B': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > (1ull << 40)) {
				errorf("invalid --objects-rate '%s': expected a number of bytes (1..2^40)", optarg);
				return 2;
			}
			o.objects_rate = v;
			set_fixed = 1;
			break;
		}
		case 'q':
			quiet = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			fputs("\n", stdout);
			fputs(send_options_help, stdout);
			return 0;
		default:
			die_usage(usage_text);
		}
	}
	if (pid) {
		if (optind < argc) {
			errorf("--pid records a running process: give no command");
			die_usage(usage_text);
		}
	} else if (duration > 0) {
		errorf("--duration only makes sense with --pid");
		return 2;
	} else if (optind >= argc) {
		errorf("no command given");
		die_usage(usage_text);
	}
	/* Events are checked here, before anything runs. */
	static char agent_events[512];
	if (period && !events) {
		errorf("-c sets the period of the first -e event: give -e too");
		return 2;
	}
	if (events) {
		int clock = 0;
		if (record_events_setup(events, period, o.rate_hz, rate_given, o.mode, agent_events,
					sizeof(agent_events), &o.event_period, &clock))
			return 2;
		o.events = agent_events;
		/* The session's rate is a time rate: only a clock event has one. */
		o.rate_hz = clock ? (unsigned)(1000000000ull / o.event_period) : 0;
	}
	o.argv = argv + optind;
	o.argc = argc - optind;

	/* With -f, -o names the converted output; the .strata profile goes to
	 * --raw FILE, or to a temporary file removed after the conversion. */
	const struct exporter *ex = NULL;
	static char tmp_raw[4096];
	if (format) {
		if (!(ex = convert_find(format)))
			return 2;
		static char def_out[64];
		snprintf(def_out, sizeof(def_out), "strata%s", ex->extension);
		if (!output)
			output = def_out;
		if (raw) {
			o.output = raw;
		} else {
			const char *td = getenv("TMPDIR");
			snprintf(tmp_raw, sizeof(tmp_raw), "%s/strata-XXXXXX.strata", td && *td ? td : "/tmp");
			int fd = mkstemps(tmp_raw, 7);
			if (fd < 0) {
				errorf("cannot create a temporary profile in /tmp: %s", strerror(errno));
				return 2;
			}
			close(fd);
			o.output = tmp_raw;
		}
		/* Fail before running the command if the output cannot be
		 * written ("-" is standard output). */
		if (strcmp(output, "-") != 0) {
			int existed = access(output, F_OK) == 0;
			FILE *t = fopen(output, "a");
			if (!t) {
				errorf("cannot write %s: %s", output, strerror(errno));
				if (tmp_raw[0])
					unlink(tmp_raw);
				return 2;
			}
			fclose(t);
			/* Leave no empty file behind if the command fails before
			 * the conversion writes it. */
			if (!existed)
				unlink(output);
		}
	} else if (raw) {
		errorf("--raw only makes sense with -f FORMAT");
		return 2;
	} else if (output) {
		o.output = output;
	}

	/* --send: the spool and its sender first; without -o (or -f) the
	 * windows are the only output. */
	int sending = rs.cfg.set;
	rs.quiet = quiet;
	int no_file = sending && !output && !format;
	if (sending && record_send_start(&rs, serr, sizeof(serr))) {
		errorf("%s", serr);
		if (tmp_raw[0])
			unlink(tmp_raw);
		return 2;
	}

	char err[1024];
	struct launch l;
	int st;
	if (pid && no_file) {
		static char agent_opts[1024];
		struct attach_want want;
		attach_want_from(&want, &o, set_fixed || events, agent_opts, sizeof(agent_opts));
		char disp[4096];
		send_url_display(rs.cfg.url, disp, sizeof(disp));
		if (record_send_pid(&rs, (pid_t)pid, want.options, err, sizeof(err))) {
			errorf("%s", err);
			record_send_finish(&rs);
			return 2;
		}
		if (!quiet)
			fprintf(stderr, "strata: sending process %d's profile to %s every %g s; Ctrl-C to stop\n", (int)pid,
				disp, rs.cfg.every_ms / 1000.0);
		wait_attached((pid_t)pid, duration, NULL, quiet);
		if (record_send_pid_stop((pid_t)pid, err, sizeof(err)))
			warnf("%s", err);
		record_send_finish(&rs);
		return 0;
	}
	if (pid) {
		struct attach a;
		/* The sampling settings load the agent, or must match the one
		 * already there; without any, an agent there is taken as it is. */
		static char agent_opts[1024];
		struct attach_want want;
		attach_want_from(&want, &o, set_fixed || events, agent_opts, sizeof(agent_opts));
		if (sending)
			want.send = rs.keys;
		if (attach_start(&a, (pid_t)pid, o.output, rate_given ? o.rate_hz : 0, o.paused, 0, &want, err,
				 sizeof(err))) {
			record_send_finish(&rs);
			errorf("%s", err);
			if (tmp_raw[0])
				unlink(tmp_raw);
			else if (a.l.output_abs[0])
				unlink(a.l.output_abs);
			return 2;
		}
		if (!quiet)
			fprintf(stderr, "strata: recording process %d (Python %s)%s; Ctrl-C to stop\n", (int)pid, a.python,
				o.paused ? " with sampling off" : "");
		wait_attached((pid_t)pid, duration, a.l.output_abs, quiet);
		if (attach_end(&a, err, sizeof(err)))
			warnf("%s", err);
		l = a.l;
		st = 0;
	} else if (no_file) {
		o.no_output = 1;
		o.send_options = rs.opts;
		memset(&l, 0, sizeof(l));
		int code;
		if (launch_start(&o, &l, &code, err, sizeof(err))) {
			errorf("%s", err);
			record_send_finish(&rs);
			return code;
		}
		st = launch_wait(&l);
		record_send_finish(&rs);
		exit_like(st);
	} else {
		if (sending)
			o.send_options = rs.opts;
		if (profile_create(&o, &l, err, sizeof(err))) {
			errorf("%s", err);
			if (tmp_raw[0])
				unlink(tmp_raw);
			return 2;
		}
		int code;
		if (launch_start(&o, &l, &code, err, sizeof(err))) {
			errorf("%s", err);
			if (tmp_raw[0])
				unlink(tmp_raw);
			return code;
		}
		st = launch_wait(&l);
		if (profile_finish(&l, st))
			warnf("could not append the end of the session to %s", o.output);
		wait_for_stragglers(l.output_abs, 2000, l.pid);
	}
	if (sending)
		record_send_finish(&rs);
	struct summary s = { .first_not_profiled = -1 };
	struct reader *r = reader_open(l.output_abs, err, sizeof(err));
	if (!r) {
		errorf("%s: %s", o.output, err);
		if (tmp_raw[0])
			unlink(tmp_raw);
		exit_like(st);
	}
	if (reader_poll(r, 1, count_record, &s, err, sizeof(err)) < 0)
		errorf("%s: %s", o.output, err);
	reader_set_alive_check(r, pid_alive);
	reader_report_diag(r, stderr, "strata: warning: ");
	/* A process still running that has written nothing yet (its stream
	 * starts with its first samples): a daemon the command started. */
	pid_t writers[16];
	int nw = agent_helpers_writing(l.output_abs, writers, 16);
	size_t nst = 0;
	const struct reader_stream *sts = reader_streams(r, &nst);
	for (int i = 0; i < nw; i++) {
		int seen = 0;
		for (size_t k = 0; k < nst && !seen; k++)
			seen = sts[k].pid == (uint32_t)writers[i];
		if (!seen && writers[i] != l.pid)
			warnf("process %d, started by the command, is still running (a daemon?): it goes on writing to %s "
			      "until it exits", (int)writers[i], o.output);
	}
	reader_close(r);

	/* A refused process: its agent said why on stderr (layout, build). */
	if (s.unsupported && s.processes)
		warnf("%u process(es) ran a Python %s (%s) and were not profiled",
		      s.unsupported, s.refused == s.unsupported ? "that its agent module cannot read"
				     : s.refused ? "without a fitting agent build" : "without an agent build",
		      s.unsupported_versions);
	if (s.processes == 0) {
		if (tmp_raw[0])
			unlink(tmp_raw);
		if (s.first_not_profiled >= 0)
			errorf("nothing was profiled: %s", s.notes[s.first_not_profiled]);
		else if (s.unsupported)
			errorf("nothing was profiled: %s Python %s", s.refused == s.unsupported ?
			       "the agent module cannot read" : s.refused ? "no fitting agent build for" :
			       "no agent build for", s.unsupported_versions);
		else if (pid)
			errorf("nothing was recorded from process %u", pid);
		else
			errorf("no Python process was seen: nothing was profiled (is '%s' a Python program?)",
			       o.argv[0]);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			exit(1);
		exit_like(st);
	}
	if (!quiet)
		fprintf(stderr, "strata: %llu samples, %u process%s, %u thread%s, %llu dropped -> %s\n",
			(unsigned long long)s.samples, s.processes, s.processes == 1 ? "" : "es", s.threads,
			s.threads == 1 ? "" : "s", (unsigned long long)s.dropped, ex ? output : o.output);
	/* (With -f, the profile's warnings below carry them.) */
	for (unsigned i = 0; i < s.nnotes && !ex; i++)
		warnf("%s", s.notes[i]);
	if (s.more_notes && !ex)
		warnf("%u more such notes: `strata report` lists them", s.more_notes);
	if (ex) {
		struct load_opts lo = { 0 };
		struct profile *p = profile_load(l.output_abs, &lo, err, sizeof(err));
		int rc = 1;
		if (!p) {
			errorf("%s: %s", o.output, err);
		} else {
			for (uint32_t i = 0; i < p->nwarnings; i++)
				warnf("%s: %s", o.output, p->warnings[i]);
			struct export_opts eo = { .title = p->command, .source = o.output };
			rc = convert_to(p, ex, output, &eo);
			profile_free(p);
		}
		if (tmp_raw[0])
			unlink(tmp_raw);
		if (rc && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			exit(1);
	}
	exit_like(st);
}
