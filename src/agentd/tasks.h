/*
 * tasks.h — asyncio in the helper: finding the target's tasks and turning
 * a sample of a thread that runs a task into the task's logical stack,
 * with task names in the stream (tasks.c); sampling the suspended tasks
 * where they wait in wall mode, on the thread that runs their loop
 * (tasks-wall.c). And the lock every caller of the reader holds (its
 * calls are not reentrant: one cache of the target's memory).
 */
#ifndef STRATA_AGENTD_TASKS_H
#define STRATA_AGENTD_TASKS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/agent.h"
#include "common/format.h"

extern pthread_mutex_t agentd_reader_lock;

/* A sample's logical stack: its frames, the awaiters' after them. */
struct tstack {
	struct strata_pyframe *py;
	uint32_t npy, cap;
	struct rec_task_frame *tasks;
	uint32_t ntasks, capb;
	uint32_t loop_at;
};

/* tasks.c */

/* Looks for asyncio in the target (at most every 100 ms until found). */
void tasks_poll(void);
int tasks_ready(void);
/* The logical stack of sample h (of a thread running task h->task, or a
 * waiting task's sample), whose tail names the task (name, nlen bytes;
 * nlen 0: none): 0 with out filled, -1 to keep the sample as it is. May
 * append TASK records to recs. */
int tasks_logical(const struct rsample *h, const struct strata_pyframe *py, const char *name, unsigned nlen,
		  struct tstack *out, struct wbuf *recs);
/* The end of a writer pass: resolved chains are forgotten. */
void tasks_pass_end(void);
/* A new stream: task records start over. */
void tasks_stream_reset(void);

/* tasks-wall.c */

/* Wall mode (the sampler thread, each tick): samples of the suspended
 * tasks, where each waits (SAMPLE_TASK_WAITING), into the sampler's ring. */
void tasks_wall_tick(void);
/* The writer saw thread tid run a task of event loop `loop`. */
void tasks_loop_seen(uint64_t loop, pid_t tid);

#endif
