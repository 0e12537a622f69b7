/*
 * waitwhy.h — why a blocked thread of the target waits (waitwhy.c).
 */
#ifndef STRATA_AGENTD_WAITWHY_H
#define STRATA_AGENTD_WAITWHY_H

#include <stdint.h>
#include <sys/types.h>

/* Not a reason, never recorded: the thread is runnable again (it woke
 * between the read of its state and of its system call). */
#define WAIT_WOKE 0xff

/* The reason (enum wait_reason, common/format.h) thread tid of the target
 * is blocked now, WAITR_UNKNOWN if it cannot be told, WAIT_WOKE if it is
 * not blocked any more. */
uint8_t wait_why(pid_t tid);

#endif
