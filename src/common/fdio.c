/*
 * fdio.c — see fdio.h.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "fdio.h"

int fd_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = 0;
			return -1;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}
