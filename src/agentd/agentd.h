/*
 * agentd.h — the modules of strata-agentd, the helper process that does
 * the agent's background work for one profiled process (see agent.h for
 * the map, link.h for how it is started and talked to).
 */
#ifndef STRATA_AGENTD_H
#define STRATA_AGENTD_H

#include <stddef.h>
#include <stdint.h>

#include "shm/agent.h"

/* The reader of the target's interpreter (strata-pyreader-X.Y.Z.so). */
extern const struct strata_pyreader *agentd_reader;

/* agentd.c: the target's pid as a pidfd (for pidfd_getfd), or -1. */
int agentd_target_pidfd(void);
/* Whether the address space the helper was started for is gone (the
 * target exec'd, or is dying): nothing may be signalled or opened on its
 * threads any more, they may be another program's. One small read. */
int agentd_target_gone(void);

/* The most processes one helper serves at once (more start their own). */
#define AGENTD_TARGETS_MAX 1024

/* writer.c (its pieces share writer.h) */
int writer_start(void);
int writer_start_standby(void);
/* Stops the writer thread, drains every ring and ends the stream. */
void writer_finish(int reason);
/* A target the writer served may be freed once no round of the writer
 * thread begun by then (writer_round, taken after writer_finish) can
 * still be on it: writer_past(r). */
uint64_t writer_round(void);
int writer_past(uint64_t r);
void writer_poke(void);
/* Sampling is about to start: code deaths matter again. */
void writer_set_busy(void);
/* writer-output.c: output control for control.c. attach: fd (>= 0) or
 * path names the new output; with create_session the agent writes the
 * file header and a session of its own first (the file must be empty). */
int writer_attach(int fd, const char *path, int create_session, char *err, size_t errlen);
int writer_detach(char *err, size_t errlen);
/* Copies what the output holds so far, as a finished profile, to dst. */
int64_t writer_dump(int dst, char *err, size_t errlen);
void writer_flush_now(void);
/* The current output's path into buf ("" when there is none); returns
 * whether there is an output. */
int writer_output(char *buf, size_t n);
/* agentd.c: a slot the writer retires: the helper's descriptors for it go. */
void helper_slot_release(struct tslot *s);

/* send.c: continuous profiling, windows for the sender (docs/send.md) */
/* At start: join the directory the options name (record --send, a fork
 * parent's), or make one from STRATA_SEND. 0, or -1 (said on stderr). */
int send_init(void);
int send_active(void);
/* Sending that came with an attach, which its detach ends (W.lock held by
 * the caller: writer_detach ends the file's stream and the window at
 * once, so a sample drained between the two goes to neither). */
int send_ends_with_detach(void);
/* ctl send / attach with send=: windows go to dir from now on; ends with
 * send_stop (or, by_attach, with the attach's detach). */
int send_start(const char *dir, unsigned every_ms, unsigned queue, int by_attach, char *err, size_t errlen);
int send_stop(int by_detach, char *err, size_t errlen);
/* status lines (send, send_every, send_windows, send_sent, send_dropped, send_error) */
void send_status(char *buf, size_t n);
void send_finish(void);
/* The writer's side (W.lock held): the window file. */
void send_window_open(void);
void send_window_chunk(const void *d, size_t n);
void send_window_close(int publish);
int send_window_due(uint64_t now);
/* Windows are cut from now on (1) or no more (0); under W.lock. */
void send_arm(int on);
/* writer-output.c: the stream restarts so a window begins or ends. */
void writer_send_begin(void);
void writer_send_end(void);

/* control.c */
int control_start(int lfd, const char *path);
void control_stop(void);
/* The listening socket while no thread serves it yet (the main thread
 * polls it), else -1; control_wake starts the thread at a first client. */
int control_pollfd(void);
void control_wake(void);

/* triggers (control.c): sampling on and off in every thread, the rate. */
void triggers_set_enabled(int on);
int triggers_set_rate(unsigned hz);

/* wall.c */
int wall_start(void);
void wall_stop(void);
void wall_wake(void);

/* scan.c: threads a dlopen'ed agent's wrapper never saw. */
void threads_scan(void);
void scan_note_ended(const struct tslot *s); /* caller holds reg_lock */

/* jit-poll.c (the listener API is jit.h) */
struct wbuf;
void jit_poll(struct wbuf *recs);
void jit_stream_reset(void);
uint64_t jit_images_seen(void);

/* jitdump.c */
void jitdump_start(void);

#endif
