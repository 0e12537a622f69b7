/*
 * fdio.h — writing a whole buffer to a file descriptor, for the agent and
 * the CLI alike (async-signal-safe: write(2) in a loop, nothing else).
 */
#ifndef STRATA_FDIO_H
#define STRATA_FDIO_H

#include <stddef.h>

/* Writes all `n` bytes, retrying after EINTR and short writes. Returns 0,
 * or -1 with errno set (0 when write() wrote nothing). */
int fd_write_all(int fd, const void *p, size_t n);

#endif
