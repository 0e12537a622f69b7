/*
 * ctlsock.h — the profiled process's control socket (see ctlsock.c).
 */
#ifndef STRATA_CTLSOCK_H
#define STRATA_CTLSOCK_H

#include <stddef.h>

/* Binds and listens; returns the listening descriptor (close-on-exec), or
 * -1 with a reason in err (none at all with STRATA_NO_CONTROL). */
int ctlsock_open(char *err, size_t errlen);
/* The socket's path ("" if none). */
const char *ctlsock_path(void);
/* After the helper took it: our copy is not needed. */
void ctlsock_close(void);
/* In a fork child: the socket was the parent's. */
void ctlsock_forget(void);

#endif
