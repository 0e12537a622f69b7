/*
 * builtin-top.c — `strata top`: a live view of a running program's hottest
 * functions and lines (docs/top.md).
 *
 * The profile grows in a .strata file (written by the program's agents);
 * the view tails it with the incremental reader and profile_ingest(), and
 * about once a second shows two windows side by side: the last interval
 * (agg_filter.first_sample) and everything since the start. Keys change
 * the view and, through the control channel, sampling in the program.
 *
 * Quitting never kills a program the user did not start here; one started
 * here is stopped only when the user says so (or presses Ctrl-C, which is
 * what Ctrl-C would have done without the view). The terminal is restored
 * on every way out: quit, Ctrl-C, SIGTERM/SIGHUP, and the program's end.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"
#include "cli/top/top.h"
#include "common/format.h"
#include "common/snapshot.h"
#include "lib/launch.h"
#include "lib/reader.h"

static const char usage_text[] =
	"usage: strata top [options] -- COMMAND [ARGS...]\n"
	"       strata top [options] --pid PID\n"
	"\n"
	"Runs COMMAND with the strata agent (or attaches to running Python process PID,\n"
	"loading the agent into it if needed: see docs/attach.md) and shows its hottest functions and lines,\n"
	"refreshed every second: over the last interval and since the start.\n"
	"\n"
	"options:\n"
	"  -p, --pid PID        attach to a running process instead of running COMMAND;\n"
	"                       --mode, --native, -e and --objects then load its agent\n"
	"                       with them, or must be what its agent has (as for\n"
	"                       strata record --pid)\n"
	"  -F, --freq HZ        samples per second per thread (default: 1000)\n"
	"      --mode MODE      cpu (default) or wall, as for strata record\n"
	"      --native         record native frames too (docs/native.md)\n"
	"  -e, --event EVENTS   events to record, passed on to strata record\n"
	"      --objects        sample allocations too (strata record --objects) and\n"
	"                       start in the objects view: objects created per second\n"
	"                       by type and the lines that create most\n"
	"      --objects-rate BYTES  one allocation sample per BYTES (implies --objects)\n"
	"      --type NAME      only allocations of type NAME (dict, Foo, ...); implies\n"
	"                       --objects for a command started here\n"
	"      --task NAME      asyncio: only the samples of task NAME (running or\n"
	"                       waiting; the 'k' key cycles through the tasks)\n"
	"  -o, --output FILE    keep the profile in FILE (default: a temporary file,\n"
	"                       removed at the end; the 'w' key saves a copy)\n"
	"  -i, --interval SECS  refresh interval (default: 1)\n"
	"  -n, --rows N         rows per refresh in plain text (default: 15)\n"
	"      --no-curses      plain periodic text instead of the full-screen view\n"
	"                       (also when the output is not a terminal)\n"
	"  -h, --help           show this help\n"
	"\n"
	"keys: q quit, p sampling on/off, space freeze, l functions/lines, s/t sort by\n"
	"self/total, a last interval/since start, e event, T/P thread/process filter,\n"
	"o objects view, y type filter, k asyncio task filter, w save, ? help. With the full-screen view the program's output goes to a log\n"
	"file, named at the end.\n";

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) { got_signal = sig; }

static double now_s(void) { return (double)monotonic_ns() / 1e9; }

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

struct top {
	struct top_target t;
	struct reader *r;
	struct profile *p;
	struct top_settings s;
	struct top_frame f;
	struct top_status st;
	int curses, rows;
	double interval, t0, last_refresh;
	uint64_t mark, next_mark;          /* sample indices: the shown interval's start, the next one's */
	uint64_t dmark, next_dmark;        /* dropped, likewise */
	double shown_interval;
	char command[1024];
	char message[512];
	double message_until;
};

static void set_message(struct top *T, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_message(struct top *T, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(T->message, sizeof(T->message), fmt, ap);
	va_end(ap);
	T->message_until = now_s() + 4;
}

static double elapsed(struct top *T)
{
	uint64_t now = monotonic_ns();
	if (T->p->start_ns && T->p->start_ns < now)
		return (double)(now - T->p->start_ns) / 1e9;
	return now_s() - T->t0;
}

static void rebuild(struct top *T)
{
	top_frame_free(&T->f);
	if (top_frame_build(T->p, &T->s, T->mark, T->dmark, T->shown_interval, elapsed(T), &T->f))
		set_message(T, "out of memory");
}

static void draw(struct top *T)
{
	T->st.message = T->message[0] && now_s() < T->message_until ? T->message : NULL;
	if (T->curses)
		view_curses_draw(T->p, &T->s, &T->f, &T->st);
	else
		view_plain_print(T->p, &T->s, &T->f, &T->st, T->rows, 0);
}

/* Reads what was appended; returns -1 on a read error. */
static int ingest(struct top *T, int final)
{
	char err[512];
	if (profile_ingest(T->p, T->r, final, err, sizeof(err))) {
		set_message(T, "cannot read %s: %s", T->t.file, err);
		return -1;
	}
	if (T->p->command && !T->command[0])
		snprintf(T->command, sizeof(T->command), "%s", T->p->command);
	if (!T->st.pid && T->p->nprocs)
		T->st.pid = (pid_t)T->p->procs[0].pid;
	return 0;
}

static void refresh_now(struct top *T)
{
	ingest(T, 0);
	double now = now_s();
	T->mark = T->next_mark;
	T->dmark = T->next_dmark;
	T->next_mark = T->p->nsamples;
	T->next_dmark = T->p->dropped;
	T->shown_interval = now - T->last_refresh;
	T->last_refresh = now;
	T->st.sampling = target_sampling(&T->t);
	if (!T->st.frozen)
		rebuild(T);
}

static void save_copy(struct top *T)
{
	char name[256];
	time_t tt = time(NULL);
	struct tm tm;
	localtime_r(&tt, &tm);
	char stamp[32];
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(name, sizeof(name), "strata-top-%d-%s.strata", (int)T->st.pid, stamp);
	int in = open(T->t.file, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (in < 0 || fstat(in, &sb)) {
		set_message(T, "cannot read %s: %s", T->t.file, strerror(errno));
		if (in >= 0)
			close(in);
		return;
	}
	int out = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0) {
		set_message(T, "cannot write %s: %s", name, strerror(errno));
		close(in);
		return;
	}
	char err[256];
	int64_t n = snapshot_copy(in, (uint64_t)sb.st_size, out, monotonic_ns(), err, sizeof(err));
	close(in);
	if (close(out) || n < 0) {
		set_message(T, "cannot write %s: %s", name, n < 0 ? err : strerror(errno));
		unlink(name);
		return;
	}
	set_message(T, "saved %lld bytes to %s", (long long)n, name);
}

enum quit { Q_NONE, Q_QUIT, Q_STOP, Q_LEAVE, Q_ENDED, Q_SIGNAL };

/* One key of the full-screen view. */
static enum quit on_key(struct top *T, int c)
{
	char err[512];
	switch (c) {
	case 'q':
	case 'Q':
		if (!T->t.started)
			return Q_LEAVE;
		T->st.prompt = "Stop the program? y: stop it  n: leave it running  other key: cancel";
		draw(T);
		int k;
		while ((k = view_curses_key(200)) < 0 && !got_signal && target_alive(&T->t))
			;
		T->st.prompt = NULL;
		if (k == 'y' || k == 'Y')
			return Q_STOP;
		if (k == 'n' || k == 'N')
			return Q_LEAVE;
		break;
	case 'p': {
		int on = T->st.sampling != 1;
		if (target_set_sampling(&T->t, on, err, sizeof(err)))
			set_message(T, "%s", err);
		else
			set_message(T, "sampling %s", on ? "on" : "off");
		T->st.sampling = target_sampling(&T->t);
		break;
	}
	case ' ':
		T->st.frozen = !T->st.frozen;
		break;
	case 'l':
		T->s.lines = !T->s.lines;
		break;
	case 's':
		T->s.sort = SORT_SELF;
		break;
	case 't':
		T->s.sort = SORT_TOTAL;
		break;
	case 'a':
		T->s.window_all = !T->s.window_all;
		break;
	case 'e':
		T->s.event = T->p->nevents ? (T->s.event + 1) % T->p->nevents : 0;
		break;
	case 'o':
		T->s.objects = !T->s.objects;
		break;
	case 'y':
		top_next_type(T->p, &T->s);
		set_message(T, "type %s", T->s.type[0] ? T->s.type : "all");
		break;
	case 'k':
		top_next_task(T->p, &T->s);
		set_message(T, "task %s", T->s.task[0] ? T->s.task : "all");
		break;
	case 'T':
		top_next_thread(T->p, &T->s);
		break;
	case 'P':
		top_next_process(T->p, &T->s);
		break;
	case 'w':
		save_copy(T);
		break;
	case '?':
	case 'h':
		view_curses_help();
		break;
	case 12: /* Ctrl-L, or the terminal was resized */
		break;
	default:
		return Q_NONE;
	}
	/* Show the change now, from the same data. */
	if (!T->st.frozen || c == ' ')
		rebuild(T);
	draw(T);
	return Q_NONE;
}

/* The program's output, when it went to a log and ended early (record
 * refused an option, the command was not found): show it. */
static void show_log_tail(const char *log)
{
	FILE *f = log[0] ? fopen(log, "re") : NULL;
	if (!f)
		return;
	char line[1024];
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

static void describe_end(struct top *T)
{
	if (!T->t.started) {
		printf("strata: process %d ended\n", (int)T->t.att.pid);
		return;
	}
	int st = T->t.status;
	if (WIFSIGNALED(st))
		printf("strata: %s was killed by signal %d (%s)\n", T->command[0] ? T->command : "the program", WTERMSIG(st),
		       strsignal(WTERMSIG(st)));
	else
		printf("strata: %s exited with status %d\n", T->command[0] ? T->command : "the program",
		       WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

int cmd_top(int argc, char **argv)
{
	static struct top T;
	memset(&T, 0, sizeof(T));
	struct top_launch L = { 0 };
	static char *ropts[16];
	int nro = 0, no_curses = 0, fixed = 0, objects = 0;
	unsigned long long objects_rate = 0;
	const char *type = NULL, *mode_arg = NULL, *events_arg = NULL;
	int native = 0;
	unsigned pid = 0, rows = 15;
	double interval = 1.0;
	static const struct option longopts[] = {
		{ "pid", required_argument, 0, 'p' },
		{ "freq", required_argument, 0, 'F' },
		{ "mode", required_argument, 0, 'm' },
		{ "native", no_argument, 0, 'N' },
		{ "event", required_argument, 0, 'e' },
		{ "output", required_argument, 0, 'o' },
		{ "interval", required_argument, 0, 'i' },
		{ "rows", required_argument, 0, 'n' },
		{ "no-curses", no_argument, 0, 'C' },
		{ "objects", no_argument, 0, 'O' },
		{ "objects-rate", required_argument, 0, 'R' },
		{ "type", required_argument, 0, 'Y' },
		{ "task", required_argument, 0, 'K' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "+p:F:e:o:i:n:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_u32(optarg, 1, 0x7fffffff, &pid)) {
				errorf("invalid --pid '%s': expected a process id", optarg);
				return 2;
			}
			break;
		case 'F':
			if (parse_u32(optarg, 1, 100000, &L.rate_hz)) {
				errorf("invalid frequency '%s': expected 1..100000 samples per second", optarg);
				return 2;
			}
			ropts[nro++] = "-F";
			ropts[nro++] = optarg;
			break;
		case 'm':
			ropts[nro++] = "--mode";
			ropts[nro++] = optarg;
			mode_arg = optarg;
			fixed = 1;
			break;
		case 'N':
			ropts[nro++] = "--native";
			native = 1;
			fixed = 1;
			break;
		case 'e':
			/* strata record checks the events and says what is wrong. */
			ropts[nro++] = "-e";
			ropts[nro++] = optarg;
			events_arg = optarg;
			fixed = 1;
			break;
		case 'o':
			L.output = optarg;
			break;
		case 'i': {
			char *end;
			interval = strtod(optarg, &end);
			if (!*optarg || *end || !(interval >= 0.1) || interval > 3600) {
				errorf("invalid --interval '%s': expected 0.1 to 3600 seconds", optarg);
				return 2;
			}
			break;
		}
		case 'n':
			if (parse_u32(optarg, 1, 10000, &rows)) {
				errorf("invalid --rows '%s'", optarg);
				return 2;
			}
			break;
		case 'C':
			no_curses = 1;
			break;
		case 'O':
			if (!objects)
				ropts[nro++] = "--objects";
			objects = 1;
			if (!objects_rate)
				objects_rate = OBJECTS_DEFAULT_RATE;
			fixed = 1;
			break;
		case 'R': {
			char *end;
			objects_rate = strtoull(optarg, &end, 10);
			if (!*optarg || *end || objects_rate < 1 || objects_rate > (1ull << 40)) {
				errorf("invalid --objects-rate '%s': expected a number of bytes (1..2^40)", optarg);
				return 2;
			}
			if (!objects)
				ropts[nro++] = "--objects";
			objects = 1;
			ropts[nro++] = "--objects-rate";
			ropts[nro++] = optarg;
			fixed = 1;
			break;
		}
		case 'Y':
			if (strlen(optarg) >= sizeof(T.s.type)) {
				errorf("--type '%.40s...': too long", optarg);
				return 2;
			}
			type = optarg;
			break;
		case 'K':
			if (strlen(optarg) >= sizeof(T.s.task)) {
				errorf("--task '%.40s...': too long", optarg);
				return 2;
			}
			snprintf(T.s.task, sizeof(T.s.task), "%s", optarg);
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			die_usage(usage_text);
		}
		if (nro > 12) {
			errorf("too many options");
			return 2;
		}
	}
	if (pid && optind < argc) {
		errorf("--pid watches a running process: give no command");
		die_usage(usage_text);
	}
	if (!pid && optind >= argc) {
		errorf("no command given (or --pid PID)");
		die_usage(usage_text);
	}
	/* --pid with sampling settings: the agent is loaded with them, as by
	 * record --pid, or must already have them. */
	static struct attach_want want;
	static char agent_opts[1024], agent_events[512];
	if (pid && fixed) {
		struct launch_opts lo = { .mode = MODE_CPU, .rate_hz = L.rate_hz ? L.rate_hz : 1000, .max_depth = 512,
					  .native = native, .objects_rate = objects_rate };
		if (mode_arg && !strcmp(mode_arg, "wall")) {
			lo.mode = MODE_WALL;
		} else if (mode_arg && strcmp(mode_arg, "cpu")) {
			errorf("invalid mode '%s': expected cpu or wall", mode_arg);
			return 2;
		}
		if (events_arg) {
			int clock = 0;
			if (record_events_setup(events_arg, NULL, lo.rate_hz, L.rate_hz != 0, lo.mode, agent_events,
						sizeof(agent_events), &lo.event_period, &clock))
				return 2;
			lo.events = agent_events;
		}
		attach_want_from(&want, &lo, 1, agent_opts, sizeof(agent_opts));
		L.want = &want;
	}
	/* A command started to watch one type's allocations records them. */
	if (type && !pid && !objects) {
		ropts[nro++] = "--objects";
		objects = 1;
	}
	/* The objects view, with the lines that allocate. */
	T.s.objects = objects || type;
	T.s.lines = T.s.objects;
	if (type)
		snprintf(T.s.type, sizeof(T.s.type), "%s", type);
	T.curses = !no_curses && isatty(1) && isatty(0) && getenv("TERM") && strcmp(getenv("TERM"), "dumb");
	T.rows = (int)rows;
	T.interval = interval;
	L.argv = pid ? NULL : argv + optind;
	L.pid = (pid_t)pid;
	L.record_opts = ropts;
	L.nrecord_opts = nro;
	L.redirect = T.curses;

	/* Handlers before anything starts, so no way out skips the cleanup. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	char err[1024];
	if (target_open(&T.t, &L, err, sizeof(err))) {
		errorf("%s", err);
		return 2;
	}
	if (pid && !T.t.att.ours && L.output) {
		warnf("process %u is already recorded to %s: -o %s is not used", pid, T.t.file, L.output);
		L.output = NULL;
	}
	T.t0 = T.last_refresh = now_s();
	T.st.command = T.command;
	T.st.pid = pid ? (pid_t)pid : 0;

	/* The file exists once strata record has written its header. */
	while (!(T.r = reader_open(T.t.file, err, sizeof(err)))) {
		if (!target_alive(&T.t) || got_signal) {
			if (T.t.started && !got_signal) {
				show_log_tail(T.t.log);
				target_close(&T.t);
				return WIFEXITED(T.t.status) && WEXITSTATUS(T.t.status) ? WEXITSTATUS(T.t.status) : 2;
			}
			target_stop(&T.t, SIGTERM);
			target_close(&T.t);
			return got_signal ? 128 + got_signal : 2;
		}
		sleep_ms(20);
	}
	T.p = profile_new(NULL);
	if (!T.p) {
		errorf("out of memory");
		target_stop(&T.t, SIGTERM);
		target_close(&T.t);
		return 2;
	}
	if (T.curses && view_curses_open()) {
		warnf("cannot use this terminal (TERM=%s) for the full-screen view: plain text follows",
		      getenv("TERM") ? getenv("TERM") : "");
		T.curses = 0;
	}
	refresh_now(&T);
	/* Plain text starts with the first interval that has something. */
	if (T.curses)
		draw(&T);

	enum quit q = Q_NONE;
	while (q == Q_NONE) {
		if (got_signal) {
			q = Q_SIGNAL;
			break;
		}
		if (!target_alive(&T.t)) {
			q = Q_ENDED;
			break;
		}
		if (T.curses) {
			int k = view_curses_key(100);
			if (k >= 0)
				q = on_key(&T, k);
		} else {
			sleep_ms(100);
		}
		if (q == Q_NONE && now_s() - T.last_refresh >= T.interval) {
			refresh_now(&T);
			if (!T.st.frozen)
				draw(&T);
		}
	}

	int code = 0;
	int sig = got_signal;
	if (q == Q_SIGNAL) {
		/* Ctrl-C stops a program started here, as it would have
		 * without the view; an attached one runs on. */
		if (T.t.started)
			q = Q_STOP;
		else
			q = Q_LEAVE;
	}
	if (q == Q_LEAVE) {
		int ours = T.t.att.ours;
		if (T.curses)
			view_curses_close();
		if (target_leave(&T.t, err, sizeof(err)))
			warnf("%s", err);
		if (T.t.started) {
			printf("strata: left %s running with sampling off%s%s\n", T.command[0] ? T.command : "the program",
			       T.t.log[0] ? "; its output goes to " : "", T.t.log[0] ? T.t.log : "");
			T.t.log[0] = 0; /* still being written: keep it */
		}
		else if (ours)
			printf("strata: detached from process %d; it runs on with sampling off\n", (int)T.t.att.pid);
		else
			printf("strata: process %d runs on, still recorded to %s\n", (int)T.t.att.pid, T.t.file);
	} else {
		if (q == Q_STOP)
			target_stop(&T.t, sig ? sig : SIGINT);
		/* The end: everything the program wrote, as a final table. */
		if (!T.t.started && T.t.att.ours)
			attach_end(&T.t.att, err, sizeof(err));
		ingest(&T, 1);
		if (T.curses)
			view_curses_close();
		T.st.message = NULL;
		top_frame_free(&T.f);
		T.s.window_all = 1;
		if (top_frame_build(T.p, &T.s, 0, 0, 0, elapsed(&T), &T.f) == 0)
			view_plain_print(T.p, &T.s, &T.f, &T.st, T.curses && T.rows > 10 ? 10 : T.rows, 1);
		describe_end(&T);
		if (T.t.started && T.t.ended) {
			int st = T.t.status;
			code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
		}
		if (T.t.log[0]) {
			struct stat sb;
			if (stat(T.t.log, &sb) == 0 && sb.st_size > 0)
				printf("strata: the program's output is in %s\n", T.t.log);
		}
	}
	if (L.output)
		printf("strata: profile in %s\n", L.output);
	fflush(stdout);
	top_frame_free(&T.f);
	profile_free(T.p);
	reader_close(T.r);
	target_close(&T.t);
	return code;
}
