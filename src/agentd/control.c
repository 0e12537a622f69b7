/*
 * control.c — the agent's control channel (docs/control.md), served by the
 * helper.
 *
 * Every profiled process listens on its own Unix socket,
 * $XDG_RUNTIME_DIR/strata/PID.sock or /tmp/strata-UID/PID.sock (directory
 * 0700, socket 0600, and each peer's uid checked with SO_PEERCRED: only the
 * process's own user may control it). The profiled process binds it
 * (ctlsock.c); a thread of its helper serves one connection at a time: one
 * request, one reply (common/ctlproto.h). Code in the profiled process
 * itself (the Python module) connects to the same socket.
 *
 * Commands:
 *   status             pid, python, mode, rate, events, sampling, samples,
 *                      dropped, threads, loaded, output, native, depth,
 *                      perfmap, jitlines, period
 *   start | stop       sampling on / off (triggers armed or disarmed: a
 *                      stopped agent takes no signals and no wakeups)
 *   attach [+fd]       stream to a new output (rate=HZ, paused=1, path=P,
 *                      create=1: write the file header and a session too)
 *   detach             end the stream, close the output, sampling off
 *   dump +fd           a finished copy of what the output holds so far
 *   flush              write what the rings hold now
 *   send               continuous profiling (send.c, docs/send.md):
 *                      windows to the spool dir=D (every=MS, queue=N)
 *                      from now on; stop=1 ends it. attach takes the
 *                      same as send=D, every, queue: sending for as long
 *                      as the attach
 *
 * A socket left behind by a process that died without cleaning up (killed
 * by SIGKILL) is removed by the next agent of the same user that starts,
 * and by the CLI when a connection to it is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <linux/perf_event.h>
#include <sys/ioctl.h>

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#include "shm/agent.h"
#include "agentd.h"
#include "common/ctlproto.h"
#include "common/format.h"
#include "target.h"

struct control_state {
	pthread_mutex_t cmd_lock;   /* one command at a time */
	pthread_mutex_t start_lock; /* starting and stopping the thread */
	int lfd;                    /* listening socket, -1 if none */
	int wake[2];                /* tells the thread to stop */
	pthread_t thread;
	int armed;                  /* listening: the thread starts at the first client */
	int running;
	char dir[256];
	char path[108];
};

static void control_init(struct control_state *s)
{
	pthread_mutex_init(&s->cmd_lock, NULL);
	pthread_mutex_init(&s->start_lock, NULL);
	s->lfd = -1;
	s->wake[0] = s->wake[1] = -1;
}

TARGET_STATE(struct control_state, control, control_init)
#define C (*control_of(agentd_target))

/* ---- sampling on and off, the rate ------------------------------------------ */

/* A thread's trigger, as a descriptor of ours for the moment: the
 * events the helper opened itself (until the thread took its copy), else
 * a copy of the thread's own taken for this call (pidfd_getfd; *tmp is
 * set: close it after). -1 when ptrace rules forbid the copy, or the
 * program closed the event. */
static int event_fd(struct tslot *s, int *tmp)
{
	*tmp = 0;
	if (s->helper_fd >= 0 && !atomic_load(&s->fd_taken))
		return s->helper_fd;
	int pfd = agentd_target_pidfd();
	if (s->trigger_fd < 0 || pfd < 0)
		return -1;
	int fd = (int)syscall(SYS_pidfd_getfd, pfd, s->trigger_fd, 0);
	if (fd < 0)
		return -1;
	/* The program may have closed ours and reused the number (for an
	 * event of its own, even). */
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0 || (link[n] = 0, strcmp(link, "anon_inode:[perf_event]")) ||
	    (s->ev_id[0] && !trigger_is_ours(s, fd, 0))) {
		close(fd);
		return -1;
	}
	*tmp = 1;
	return fd;
}

/* Otherwise the thread's handler sets its trigger itself when told
 * (sampler.c): a POSIX timer always, a perf event when no copy could be
 * taken. A blocked thread takes the signal when it returns to user space
 * (the calls that a handler would cut short hold SIGPROF, sleeps.c). */
#define TOGGLE_TAG ((void *)&agent.trigger)

static void signal_toggle(struct tslot *s)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGPROF;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_ptr = TOGGLE_TAG;
	syscall(SYS_rt_tgsigqueueinfo, agent.pid, s->tid, SIGPROF, &si);
}

/* Sets one thread's trigger to the current state: on or off, at the
 * current period. */
static void set_trigger(struct tslot *s, int on)
{
	if (agent.trigger == TRIGGER_WALL_SAMPLER)
		return;
	if (agent.trigger == TRIGGER_POSIX_CPU_TIMER) {
		signal_toggle(s);
		return;
	}
	int tmp;
	int fd = event_fd(s, &tmp);
	if (fd < 0) {
		signal_toggle(s);
		return;
	}
	if (on && agent.trigger == TRIGGER_PERF_TASK_CLOCK) {
		uint64_t period = agent.cfg.period_ns;
		ioctl(fd, PERF_EVENT_IOC_PERIOD, &period);
	}
	/* Events the thread holds re-arm one overflow at a time (REFRESH);
	 * off, the handler also stops re-arming by itself. Those the helper
	 * holds (cpu mode, scanned threads) run freely. */
	trigger_fd_enable(fd, on, !tmp ? 0 : !s->external && !s->ev_map);
	if (tmp)
		close(fd);
}

void triggers_set_enabled(int on)
{
	if (on)
		writer_set_busy();
	atomic_store(&agent.sampling, on);
	reg_lock();
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (!atomic_load(&s->exited))
			set_trigger(s, on);
	reg_unlock();
	if (on) {
		/* Both sleep while sampling is off. */
		writer_poke();
		wall_wake();
	}
}

int triggers_set_rate(unsigned hz)
{
	if (hz < 1 || hz > 100000)
		return -1;
	/* An event-driven agent samples every -c occurrences, not at a rate. */
	if (agent.trigger == TRIGGER_PERF_EVENT)
		return hz == agent.cfg.rate_hz ? 0 : -1;
	if (hz == agent.cfg.rate_hz)
		return 0;
	agent.cfg.rate_hz = hz;
	agent.cfg.period_ns = 1000000000ull / hz;
	if (atomic_load(&agent.sampling)) {
		reg_lock();
		for (struct tslot *s = agent.slots; s; s = s->next)
			if (!atomic_load(&s->exited))
				set_trigger(s, 1);
		reg_unlock();
	}
	return 0;
}

static void reply_err(char *reply, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_err(char *reply, size_t n, const char *fmt, ...)
{
	va_list ap;
	int w = snprintf(reply, n, "error: ");
	va_start(ap, fmt);
	if (w > 0 && (size_t)w < n)
		vsnprintf(reply + w, n - (size_t)w, fmt, ap);
	va_end(ap);
}

static void cmd_status(char *reply, size_t n)
{
	uint64_t samples = atomic_load(&agent.retired_samples), dropped = atomic_load(&agent.retired_dropped);
	unsigned threads = 0;
	reg_lock();
	for (struct tslot *s = agent.slots; s; s = s->next) {
		samples += atomic_load(&s->samples);
		dropped += atomic_load(&s->dropped);
		if (!atomic_load(&s->exited))
			threads++;
	}
	reg_unlock();
	char out[4096], events[512] = "";
	int has = writer_output(out, sizeof(out));
	if (agent.trigger == TRIGGER_PERF_EVENT)
		for (uint32_t i = 0; i < agent.cfg.events.n; i++)
			snprintf(events + strlen(events), sizeof(events) - strlen(events), "%s%s", i ? "+" : "",
				 agent.cfg.events.ev[i].name);
	snprintf(reply, n,
		 "ok\npid=%d\npython=%s\nmode=%s\nrate=%u\nevents=%s\nsampling=%s\nsamples=%llu\ndropped=%llu\n"
		 "threads=%u\nloaded=%s\noutput=%s\nnative=%d\ndepth=%u\nperfmap=%d\njitlines=%d\nperiod=%llu\n"
		 "objects=%llu\nsignal_handoffs=%llu\nsignal_handoff_us=%llu\nsignal_handoff_max_us=%llu\n"
		 "signal_handoff_timeouts=%llu\nsignal_reroutes=%llu\n",
		 (int)agent.pid, agent.python_version, agent.cfg.mode == MODE_WALL ? "wall" : "cpu", agent_rate_hz(),
		 events, atomic_load(&agent.sampling) ? "on" : "off", (unsigned long long)samples,
		 (unsigned long long)dropped, threads, agent.by_tid ? "dlopen" : "preload",
		 has ? (out[0] ? out : "(descriptor)") : "", agent.cfg.native, agent.cfg.max_depth, agent.cfg.perf_map,
		 (agent.stream_flags & PROC_JIT_LINES) != 0,
		 (unsigned long long)(agent.trigger == TRIGGER_PERF_EVENT ? agent.cfg.event_period : 0),
		 (unsigned long long)(agent.cfg.objects ? agent.cfg.objects_rate : 0),
		 (unsigned long long)atomic_load(&agent.handoff_waits),
		 (unsigned long long)(atomic_load(&agent.handoff_ns) / 1000),
		 (unsigned long long)(atomic_load(&agent.handoff_max_ns) / 1000),
		 (unsigned long long)atomic_load(&agent.handoff_timeouts),
		 (unsigned long long)atomic_load(&agent.handoff_reroutes));
	size_t l = strlen(reply);
	if (l < n)
		send_status(reply + l, n - l);
}

/* The send keys of a request (send, attach): dir, every (ms), queue. */
/* A file, or windows to send: something to record to. */
static int has_output(void)
{
	char buf[8];
	return writer_output(buf, sizeof(buf)) || send_active();
}

void control_exec(const char *req, int fd, char *reply, size_t n)
{
	/* One command at a time per target (cmd_lock); control threads of
	 * several targets at once. */
	static __thread struct ctl_request rq;
	char perr[128];
	pthread_mutex_lock(&C.cmd_lock);
	int bad = ctl_parse_request(req, &rq, perr, sizeof(perr));
	if (!agent.active) {
		reply_err(reply, n, "the agent is not active in this process");
	} else if (atomic_load(&agent.stopping)) {
		reply_err(reply, n, "the process is exiting");
	} else if (bad) {
		reply_err(reply, n, "%s", perr);
	} else if (rq.cmd == CTL_STATUS) {
		cmd_status(reply, n);
	} else if (rq.cmd == CTL_START) {
		if (!has_output()) {
			reply_err(reply, n, "no output to record to: attach one first (strata record --pid, strata top --pid)");
		} else {
			agent.cfg.paused = 0;
			triggers_set_enabled(1);
			snprintf(reply, n, "ok\nsampling=on\n");
		}
	} else if (rq.cmd == CTL_STOP) {
		agent.cfg.paused = 1;
		triggers_set_enabled(0);
		writer_poke(); /* writes out what the rings hold */
		snprintf(reply, n, "ok\nsampling=off\n");
	} else if (rq.cmd == CTL_SEND) {
		char err[512];
		if (rq.send_stop) {
			if (send_stop(0, err, sizeof(err))) {
				reply_err(reply, n, "%s", err);
			} else {
				if (!has_output()) {
					agent.cfg.paused = 1;
					triggers_set_enabled(0);
				}
				snprintf(reply, n, "ok\n");
			}
		} else if (!rq.has_send) {
			reply_err(reply, n, "send needs dir=SPOOL (strata ctl PID send URL)");
		} else if (send_start(rq.send_dir, rq.every, rq.queue, 0, err, sizeof(err))) {
			reply_err(reply, n, "%s", err);
		} else {
			agent.cfg.paused = 0;
			triggers_set_enabled(1);
			snprintf(reply, n, "ok\nsampling=on\n");
		}
	} else if (rq.cmd == CTL_ATTACH) {
		static char busy[4096];
		char err[512];
		unsigned old_rate = agent.cfg.rate_hz;
		if (writer_output(busy, sizeof(busy))) {
			/* Checked here too, so a busy agent keeps its rate. */
			reply_err(reply, n, "busy: already recording to %s", busy[0] ? busy : "a descriptor");
		} else if (rq.rate && triggers_set_rate(rq.rate)) {
			reply_err(reply, n, "this agent samples on events (-e): its period is fixed when it starts");
		} else if (rq.has_send && send_start(rq.send_dir, rq.every, rq.queue, 1, err, sizeof(err))) {
			triggers_set_rate(old_rate);
			reply_err(reply, n, "%s", err);
		} else if (writer_attach(fd, rq.has_path ? rq.path : NULL, rq.create, err, sizeof(err))) {
			/* The new stream's records name the rate: it was set first. */
			triggers_set_rate(old_rate);
			if (rq.has_send)
				send_stop(1, err + strlen(err), 1);
			reply_err(reply, n, "%s", err);
		} else {
			agent.cfg.paused = rq.paused;
			triggers_set_enabled(!rq.paused);
			snprintf(reply, n, "ok\nstream=%llu\nsampling=%s\n", (unsigned long long)agent.stream,
				 rq.paused ? "off" : "on");
		}
	} else if (rq.cmd == CTL_DETACH) {
		char err[512];
		if (writer_detach(err, sizeof(err))) {
			reply_err(reply, n, "%s", err);
		} else {
			/* Sending that came with the attach ends with it. */
			send_stop(1, err, sizeof(err));
			if (!send_active()) {
				triggers_set_enabled(0);
				agent.cfg.paused = 1;
			}
			snprintf(reply, n, "ok\nsampling=%s\n", send_active() ? "on" : "off");
		}
	} else if (rq.cmd == CTL_DUMP) {
		char err[512];
		int64_t w = fd < 0 ? -1 : writer_dump(fd, err, sizeof(err));
		if (fd < 0)
			reply_err(reply, n, "dump needs the destination's descriptor");
		else if (w < 0)
			reply_err(reply, n, "%s", err);
		else
			snprintf(reply, n, "ok\nbytes=%lld\n", (long long)w);
	} else if (rq.cmd == CTL_FLUSH) {
		writer_flush_now();
		snprintf(reply, n, "ok\n");
	} else {
		reply_err(reply, n, "unknown command '%s' (status, start, stop, attach, detach, dump, flush, send)",
			  rq.name);
	}
	pthread_mutex_unlock(&C.cmd_lock);
}

/* ---- the socket ------------------------------------------------------------ */

/* Removes sockets of processes that no longer exist. */
static void sweep_stale(void)
{
	DIR *d = opendir(C.dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		/* PID.sock, or .PID.new: one not yet renamed (ctlsock.c). */
		int hidden = e->d_name[0] == '.';
		char *end;
		long pid = strtol(e->d_name + hidden, &end, 10);
		if (pid <= 0 || strcmp(end, hidden ? ".new" : ".sock") != 0 || pid == agent.pid)
			continue;
		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
			char p[512];
			snprintf(p, sizeof(p), "%s/%s", C.dir, e->d_name);
			unlink(p);
		}
	}
	closedir(d);
}

static void serve(int c)
{
	struct timeval tv = { 2, 0 };
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* Each target's control thread has its own. */
	static __thread char req[CTL_MSG_MAX], reply[CTL_MSG_MAX];
	/* A client that connects and says nothing must not hold up the
	 * process's exit (control_stop waits for this thread). */
	struct pollfd pf[2] = { { c, POLLIN, 0 }, { C.wake[0], POLLIN, 0 } };
	int pr;
	do
		pr = poll(pf, 2, 2000);
	while (pr < 0 && errno == EINTR);
	if (pr <= 0 || pf[1].revents)
		return;
	int fd = -1;
	long r = ctl_recv(c, req, sizeof(req), &fd);
	int e = errno;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || (cr.uid != geteuid() && cr.uid != 0)) {
		/* The directory already keeps others out; this holds even for
		 * a peer that can pass it (root), or a directory made looser.
		 * The request was read first so the peer sees the reply. */
		if (fd >= 0)
			close(fd);
		reply_err(reply, sizeof(reply), "permission denied: process %d belongs to uid %u; uid %u may not control it",
			  (int)agent.pid, (unsigned)geteuid(), (unsigned)cr.uid);
		ctl_send(c, reply, strlen(reply), -1);
		return;
	}
	if (r < 0) {
		if (e == EMSGSIZE) {
			reply_err(reply, sizeof(reply), "request too long");
			ctl_send(c, reply, strlen(reply), -1);
		}
		return;
	}
	control_exec(req, fd, reply, sizeof(reply));
	if (fd >= 0)
		close(fd);
	ctl_send(c, reply, strlen(reply), -1);
}

static void *control_main(void *arg)
{
	target_enter(arg);
	sweep_stale();
	for (;;) {
		struct pollfd pf[2] = { { C.lfd, POLLIN, 0 }, { C.wake[0], POLLIN, 0 } };
		int r = poll(pf, 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || pf[1].revents)
			break;
		if (pf[0].revents & POLLIN) {
			int c = accept4(C.lfd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				serve(c);
				close(c);
			}
		}
	}
	return NULL;
}

/* The thread that serves the socket starts with the first client (the
 * main thread polls the socket until then, control_pollfd): most
 * profiled processes are never controlled, and a thread is a task
 * against the cgroup's pids.max, a helper's cost per profiled process. */
int control_start(int lfd, const char *path)
{
	if (C.armed || lfd < 0)
		return 0;
	C.lfd = lfd;
	snprintf(C.path, sizeof(C.path), "%s", path ? path : "");
	snprintf(C.dir, sizeof(C.dir), "%s", C.path);
	char *slash = strrchr(C.dir, '/');
	if (slash)
		*slash = 0;
	else
		C.dir[0] = 0;
	C.armed = 1;
	return 0;
}

int control_pollfd(void)
{
	pthread_mutex_lock(&C.start_lock);
	int fd = C.armed && !C.running ? C.lfd : -1;
	pthread_mutex_unlock(&C.start_lock);
	return fd;
}

void control_wake(void)
{
	pthread_mutex_lock(&C.start_lock);
	if (C.armed && !C.running) {
		if (pipe2(C.wake, O_CLOEXEC) == 0 && pthread_create(&C.thread, NULL, control_main, agentd_target) == 0) {
			C.running = 1;
		} else {
			agent_log("process %d: cannot start the control thread: %s; strata ctl will not reach it",
				  (int)agent.pid, strerror(errno));
			C.armed = 0;
			close(C.lfd);
			C.lfd = -1;
		}
	}
	pthread_mutex_unlock(&C.start_lock);
}

void control_stop(void)
{
	pthread_mutex_lock(&C.start_lock);
	if (C.running) {
		char b = 0;
		ssize_t w = write(C.wake[1], &b, 1);
		(void)w;
		pthread_join(C.thread, NULL);
		C.running = 0;
		close(C.wake[0]);
		close(C.wake[1]);
		C.wake[0] = C.wake[1] = -1;
	}
	if (C.armed && C.lfd >= 0)
		close(C.lfd);
	C.lfd = -1;
	C.armed = 0;
	pthread_mutex_unlock(&C.start_lock);
}
