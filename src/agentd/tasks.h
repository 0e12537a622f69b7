/*
 * tasks.h — asyncio in the helper (tasks.c): finding the target's tasks,
 * the logical stack of a sample of a running task, task names in the
 * stream; and the lock every caller of the reader holds (its calls are
 * not reentrant: one cache of the target's memory).
 */
#ifndef STRATA_AGENTD_TASKS_H
#define STRATA_AGENTD_TASKS_H

#include <pthread.h>
#include <stdint.h>

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

/* Looks for asyncio in the target (at most every 100 ms until found). */
void tasks_poll(void);
int tasks_ready(void);
/* The logical stack of sample h (of a thread running task h->task):
 * 0 with out filled, -1 to keep the sample as it is. May append REC_TASK
 * records to recs. */
int tasks_logical(const struct rsample *h, const struct strata_pyframe *py, struct tstack *out, struct wbuf *recs);
uint32_t tasks_index(uint64_t addr, const char *name, struct wbuf *recs);
/* Wall mode (the sampler thread, each tick): samples of the suspended
 * tasks, where each waits (SAMPLE_TASK_WAITING), into the sampler's ring. */
void tasks_wall_tick(void);
/* The end of a writer pass: resolved chains are forgotten. */
void tasks_pass_end(void);
/* A new stream: task records start over. */
void tasks_stream_reset(void);

#endif
