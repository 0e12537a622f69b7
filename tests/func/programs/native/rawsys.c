/* rawsys.c — for rawsys.py (test_record.py::test_syscalls_not_skipped):
 * a tight loop of getppid made with the `syscall` instruction itself, so
 * that a sampling signal often lands on the instruction before it runs.
 * getppid cannot fail: returns how many calls returned an error. */
#include <sys/syscall.h>

long rawsys_getppid(long n)
{
	long failed = 0;
	for (long i = 0; i < n; i++) {
		long r;
		__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
		if (r < 0)
			failed++;
	}
	return failed;
}
