/*
 * process.c — interposed exec*(), posix_spawn*() and _exit().
 *
 * Two jobs. First, a process image that is about to disappear without
 * running destructors (exec, _exit as used by os._exit and multiprocessing
 * children) flushes its samples first. Second, profiling follows children:
 * a program that passes its own environment to a child (subprocess with
 * env=..., os.execve) would drop LD_PRELOAD and the STRATA_* variables, so
 * exec and spawn put them back. Both paths run in the child of fork() or
 * vfork() too, where only async-signal-safe work is allowed: nothing here
 * allocates, and agent_shutdown() does nothing in a vfork child.
 */
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/agent.h"
#include "common/format.h"

extern char **environ;

/* The variables that carry profiling to children, captured at load. */
static const char *keep_vars[] = { "LD_PRELOAD", "STRATA_OUTPUT", "STRATA_OPTIONS", "STRATA_AGENT", NULL };
static char saved[4][4096];
static int saved_ok;

/* Once the output changed at run time (attach, detach: the helper sets it
 * in the shared state), children follow the current one. */
const char *process_env_output(void)
{
	int w = atomic_load(&agent.outvar.which);
	return w == 1 || w == 2 ? agent.outvar.buf[w - 1] : NULL;
}

__attribute__((constructor)) static void save_env(void)
{
	if (!getenv("STRATA_OUTPUT") && !getenv("STRATA_AGENT"))
		return;
	for (int i = 0; keep_vars[i]; i++) {
		const char *v = getenv(keep_vars[i]);
		size_t kl = strlen(keep_vars[i]), vl = v ? strlen(v) : 0;
		if (v && kl + vl + 2 <= sizeof(saved[i])) {
			memcpy(saved[i], keep_vars[i], kl);
			saved[i][kl] = '=';
			memcpy(saved[i] + kl + 1, v, vl + 1);
		}
	}
	saved_ok = 1;
}

static int has_var(char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (; envp && *envp; envp++)
		if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
			return 1;
	return 0;
}

static size_t env_count(char *const *envp)
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n;
}

static int is_var(const char *entry, const char *name)
{
	size_t n = strlen(name);
	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* Fills `out` (room for count(envp) + ENV_EXTRA entries) with envp plus any
 * of our variables it lacks. Returns envp itself when nothing is missing. */
#define ENV_EXTRA 6
static char *const *with_our_env(char *const *envp, char **out)
{
	if (!saved_ok)
		return envp;
	size_t n = 0;
	const char *ov = process_env_output();
	if (ov) {
		/* The output changed since start: whatever the environment
		 * says about it is stale. */
		for (size_t i = 0; envp && envp[i]; i++)
			if (!is_var(envp[i], "STRATA_OUTPUT") && !is_var(envp[i], "STRATA_AGENT"))
				out[n++] = envp[i];
		out[n++] = (char *)ov;
		for (int i = 0; keep_vars[i]; i++)
			if (saved[i][0] && strcmp(keep_vars[i], "STRATA_OUTPUT") && strcmp(keep_vars[i], "STRATA_AGENT") &&
			    !has_var(envp, keep_vars[i]))
				out[n++] = saved[i];
		out[n] = NULL;
		return out;
	}
	int missing = 0;
	for (int i = 0; keep_vars[i]; i++)
		if (saved[i][0] && !has_var(envp, keep_vars[i]))
			missing = 1;
	if (!missing)
		return envp;
	for (; envp && envp[n]; n++)
		out[n] = envp[n];
	for (int i = 0; keep_vars[i]; i++)
		if (saved[i][0] && !has_var(envp, keep_vars[i]))
			out[n++] = saved[i];
	out[n] = NULL;
	return out;
}

/* The next definitions (libc's), looked up when the library loads: exec
 * and _exit are async-signal-safe and may be called from a program's
 * signal handler, where dlsym must not run. Our own definition has the
 * same type, which typeof borrows; a call before the constructor ran (from
 * another library's constructor) looks up then. */
static __typeof__(&execve) real_execve;
static __typeof__(&execvpe) real_execvpe;
static __typeof__(&fexecve) real_fexecve;
static __typeof__(&posix_spawn) real_posix_spawn;
static __typeof__(&posix_spawnp) real_posix_spawnp;
static __typeof__(&_exit) real__exit;

#define REAL(name, type_unused)                                        \
	if (!real_##name)                                              \
		real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

__attribute__((constructor)) static void resolve_process(void)
{
	REAL(execve, 0);
	REAL(execvpe, 0);
	REAL(fexecve, 0);
	REAL(posix_spawn, 0);
	REAL(posix_spawnp, 0);
	REAL(_exit, 0);
}

static void before_exec(void) { agent_shutdown(END_EXEC); }
static void after_failed_exec(void)
{
	int e = errno;
	agent_resume();
	errno = e;
}

AGENT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	REAL(execve, int (*)(const char *, char *const[], char *const[]));
	char *buf[env_count(envp) + ENV_EXTRA];
	char *const *env = with_our_env(envp, buf);
	before_exec();
	int rc = real_execve(path, argv, env);
	after_failed_exec();
	return rc;
}

/* execv and execvp use the current environment: route them through the
 * envp forms so a program that removed our variables from os.environ still
 * passes them on. */
AGENT_EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

AGENT_EXPORT int execvp(const char *file, char *const argv[]) { return execvpe(file, argv, environ); }

AGENT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	REAL(execvpe, int (*)(const char *, char *const[], char *const[]));
	char *buf[env_count(envp) + ENV_EXTRA];
	char *const *env = with_our_env(envp, buf);
	before_exec();
	int rc = real_execvpe(file, argv, env);
	after_failed_exec();
	return rc;
}

AGENT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	REAL(fexecve, int (*)(int, char *const[], char *const[]));
	char *buf[env_count(envp) + ENV_EXTRA];
	char *const *env = with_our_env(envp, buf);
	before_exec();
	int rc = real_fexecve(fd, argv, env);
	after_failed_exec();
	return rc;
}

/* The execl family collects its variadic arguments and goes through the
 * vector forms above. */
#define COLLECT_ARGS(first, ap, argv, extra)                              \
	size_t n_ = 1;                                                    \
	va_start(ap, first);                                              \
	while (va_arg(ap, char *))                                        \
		n_++;                                                     \
	va_end(ap);                                                       \
	char *argv[n_ + 1];                                               \
	va_start(ap, first);                                              \
	argv[0] = (char *)first;                                          \
	for (size_t i_ = 1; i_ <= n_; i_++)                               \
		argv[i_] = va_arg(ap, char *);                            \
	extra;                                                            \
	va_end(ap)

AGENT_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv, (void)0);
	return execv(path, argv);
}

AGENT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv, (void)0);
	return execvp(file, argv);
}

AGENT_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **envp = NULL;
	COLLECT_ARGS(arg, ap, argv, envp = va_arg(ap, char **));
	return execve(path, argv, envp);
}

AGENT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	REAL(posix_spawn, int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
				  const posix_spawnattr_t *, char *const[], char *const[]));
	char *buf[env_count(envp) + ENV_EXTRA];
	return real_posix_spawn(pid, path, fa, attr, argv, with_our_env(envp, buf));
}

AGENT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			      const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	REAL(posix_spawnp, int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
				   const posix_spawnattr_t *, char *const[], char *const[]));
	char *buf[env_count(envp) + ENV_EXTRA];
	return real_posix_spawnp(pid, file, fa, attr, argv, with_our_env(envp, buf));
}

AGENT_EXPORT void _exit(int status)
{
	REAL(_exit, void (*)(int));
	agent_shutdown(END__EXIT);
	real__exit(status);
	__builtin_unreachable();
}

AGENT_EXPORT void _Exit(int status)
{
	_exit(status);
}
