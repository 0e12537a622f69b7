/*
 * slowloader.c — an LD_AUDIT library that holds a program in its dynamic
 * loader, before the loader has mapped the C library, for as many
 * milliseconds as the variable SLOWLOADER_MS says (default 1000).
 *
 * The loader loads an audit library, and calls its la_version, before it
 * maps the program's own libraries: a process started with it is, for
 * that long, what every process is for a few hundred microseconds after
 * its exec, or until the file named by STOP_FILE exists. Built with
 * -nostdlib: it must not bring a C library of its own, so it reads its
 * environment and sleeps with raw system calls.
 */
#include <stddef.h>

static long sys2(long n, long a, long b)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b) : "rcx", "r11", "memory");
	return r;
}

/* The value of variable `key` ("NAME="), or NULL. The loader passes no
 * environment to la_version; the initial process stack does: read from
 * /proc/self/environ instead. */
static const char *env(const char *key)
{
	static char buf[16384];
	static long n = -1;
	if (n < 0) {
		long fd = sys2(2 /* open */, (long)"/proc/self/environ", 0);
		n = 0;
		if (fd < 0)
			return NULL;
		long r;
		while (n < (long)sizeof(buf) - 1 && (r = ({ long x; __asm__ volatile("syscall" : "=a"(x) : "a"(0L), "D"(fd),
			"S"(buf + n), "d"((long)sizeof(buf) - 1 - n) : "rcx", "r11", "memory"); x; })) > 0)
			n += r;
		sys2(3 /* close */, fd, 0);
		buf[n] = 0;
	}
	for (long i = 0; i < n; i += 1) {
		if (i && buf[i - 1])
			continue;
		long k = 0;
		while (key[k] && buf[i + k] == key[k])
			k++;
		if (!key[k])
			return buf + i + k;
	}
	return NULL;
}

unsigned int la_version(unsigned int version)
{
	const char *v = env("SLOWLOADER_MS=");
	long ms = v ? 0 : 1000;
	for (; v && *v >= '0' && *v <= '9'; v++)
		ms = ms * 10 + (*v - '0');
	/* In steps of 10 ms, ended early once the file STOP_FILE names
	 * exists (a test that has what it needs lets the program go on). */
	const char *stop = env("STOP_FILE=");
	for (long done = 0; done < ms; done += 10) {
		if (stop && *stop && sys2(21 /* access */, (long)stop, 0) == 0)
			break;
		long step = ms - done < 10 ? ms - done : 10;
		struct { long s, ns; } ts = { 0, step * 1000000L };
		sys2(35 /* nanosleep */, (long)&ts, 0);
	}
	return version;
}
