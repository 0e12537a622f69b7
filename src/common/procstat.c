/* procstat.c — see procstat.h. */
#include "procstat.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

char *procstat_read(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t got = read(fd, buf, n - 1);
	close(fd);
	if (got <= 0)
		return NULL;
	buf[got] = 0;
	return strrchr(buf, ')');
}

const char *procstat_field(const char *rp, int field)
{
	int at = 2;
	const char *p = rp;
	for (; *p && at < field; p++)
		if (*p == ' ')
			at++;
	return at == field && *p ? p : NULL;
}
