/* An embedding program that starts its interpreter late (test_idle.py):
 * its main thread waits 300 ms on a condition variable, a futex wait the
 * wall sampler sees before any interpreter or GIL exists, then runs
 * Python as `python` would, with its own arguments.
 *
 *     late_start SCRIPT [ARG...]
 *
 * Built against the interpreter under test with its python3.X-config
 * --embed flags. */
#include <Python.h>
#include <pthread.h>
#include <time.h>

int main(int argc, char **argv)
{
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 300 * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m);
	while (pthread_cond_timedwait(&c, &m, &until) == 0)
		; /* nobody signals it: it returns ETIMEDOUT */
	pthread_mutex_unlock(&m);
	return Py_BytesMain(argc, argv);
}
