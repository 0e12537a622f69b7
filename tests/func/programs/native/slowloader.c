/*
 * slowloader.c — an LD_AUDIT library that holds a program in its dynamic
 * loader, before the loader has mapped the C library, for as many
 * milliseconds as the variable SLOWLOADER_MS says (default 1000).
 *
 * The loader loads an audit library, and calls its la_version, before it
 * maps the program's own libraries: a process started with it is, for
 * that long, what every process is for a few hundred microseconds after
 * its exec. Built with -nostdlib: it must not bring a C library of its
 * own, so it reads its environment and sleeps with raw system calls.
 */
#include <stddef.h>

static long sys2(long n, long a, long b)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b) : "rcx", "r11", "memory");
	return r;
}

static long wanted_ms(void)
{
	/* The loader passes no environment to la_version; the initial
	 * process stack does: found from /proc/self/environ instead. */
	static char buf[16384];
	long fd = sys2(2 /* open */, (long)"/proc/self/environ", 0);
	if (fd < 0)
		return 1000;
	long n = 0, r;
	while (n < (long)sizeof(buf) - 1 && (r = ({ long x; __asm__ volatile("syscall" : "=a"(x) : "a"(0L), "D"(fd),
		"S"(buf + n), "d"((long)sizeof(buf) - 1 - n) : "rcx", "r11", "memory"); x; })) > 0)
		n += r;
	sys2(3 /* close */, fd, 0);
	buf[n] = 0;
	static const char key[] = "SLOWLOADER_MS=";
	for (long i = 0; i < n; i += 1) {
		if (i && buf[i - 1])
			continue;
		long k = 0;
		while (key[k] && buf[i + k] == key[k])
			k++;
		if (key[k])
			continue;
		long v = 0;
		for (char *p = buf + i + k; *p >= '0' && *p <= '9'; p++)
			v = v * 10 + (*p - '0');
		return v;
	}
	return 1000;
}

unsigned int la_version(unsigned int version)
{
	long ms = wanted_ms();
	struct { long s, ns; } ts = { ms / 1000, ms % 1000 * 1000000L };
	sys2(35 /* nanosleep */, (long)&ts, 0);
	return version;
}
