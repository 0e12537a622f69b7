/*
 * waitwhy.h — why a blocked thread of the target waits (waitwhy.c).
 */
#ifndef STRATA_AGENTD_WAITWHY_H
#define STRATA_AGENTD_WAITWHY_H

#include <stdint.h>
#include <sys/types.h>

/* The reason (enum wait_reason, common/format.h) thread tid of the target
 * is blocked now, WAITR_UNKNOWN if it cannot be told. */
uint8_t wait_why(pid_t tid);

#endif
