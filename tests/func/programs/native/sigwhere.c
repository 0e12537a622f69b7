/* Where a signal sent to the process runs its handler (test_signals.py):
 * always in the main thread when it computes, without strata; with
 * strata too, even when the signal comes while the main thread is in the
 * sample handler, which blocks it, and the kernel gives it to a sleeping
 * thread that must pass it on (handoff.c).
 *
 *     sigwhere SIGNALS
 *
 * The main thread computes while a child process sends it SIGNALS
 * SIGUSR1s by kill(), 200 us apart, and four threads sleep in 1 ms steps.
 * Prints "main N elsewhere M": the handler's runs in the main thread and
 * in the others. Python is initialised (strata profiles Python
 * processes) but not run. Built against the interpreter under test with
 * its python3.X-config --embed flags. */
#include <Python.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_long in_main, elsewhere;
static atomic_int stop;

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	if (syscall(SYS_gettid) == getpid())
		atomic_fetch_add(&in_main, 1);
	else
		atomic_fetch_add(&elsewhere, 1);
}

static void *sleeper(void *arg)
{
	(void)arg;
	struct timespec ms = { 0, 1000000 };
	while (!atomic_load(&stop))
		nanosleep(&ms, NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 5000;
	struct sigaction a = { 0 };
	a.sa_sigaction = on_usr1;
	a.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
	sigemptyset(&a.sa_mask);
	if (sigaction(SIGUSR1, &a, NULL) != 0) {
		perror("sigaction");
		return 1;
	}
	Py_Initialize();
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, sleeper, NULL);
	pid_t parent = getpid(), child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		struct timespec gap = { 0, 200000 };
		for (long i = 0; i < n; i++) {
			kill(parent, SIGUSR1);
			nanosleep(&gap, NULL);
		}
		_exit(0);
	}
	volatile unsigned long x = 0;
	for (;;) {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i * i;
		int st;
		pid_t w = waitpid(child, &st, WNOHANG);
		if (w == child)
			break;
		if (w < 0) {
			perror("waitpid");
			return 1;
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("main %ld elsewhere %ld\n", atomic_load(&in_main), atomic_load(&elsewhere));
	return Py_FinalizeEx() < 0 ? 120 : 0;
}
