/*
 * linger.c — holds a thread in its exit for a while, after the thread
 * destructors that run before ours (strata's among them, when strata's key
 * was made first): the thread is still listed in /proc/PID/task although
 * it has ended for strata. test_python.py loads it with ctypes;
 * linger_arm(ms) arms the current thread.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void linger(void *arg)
{
	long ms = (long)(intptr_t)arg;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts))
		;
}

static void make_key(void) { pthread_key_create(&key, linger); }

/* The key is made at the first call, so after a key made before it. */
int linger_arm(int ms)
{
	pthread_once(&once, make_key);
	return pthread_setspecific(key, (void *)(intptr_t)ms);
}
