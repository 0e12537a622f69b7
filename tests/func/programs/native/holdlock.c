/*
 * holdlock.c — plays a stopped strata helper for test_limits.py: takes the
 * agent's thread list lock (agent.reg_lock) in the shared region of
 * process PID and keeps it for SECONDS, as a helper stopped (SIGSTOP, a
 * debugger) or starved while it held the list would.
 *
 *   holdlock PID SECONDS
 *
 * Prints "held" once it has the lock, "released" when it lets go. The
 * region is found through /proc/PID/maps and opened through
 * /proc/PID/map_files (root). Built with -I src: the agent's state comes
 * from src/shm/agent.h; the region's header is mirrored below, checked by
 * its magic number and by the state it points to naming PID.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/agent.h"

/* The start of struct shm_header (src/shm/shm.c). */
struct header {
	uint64_t magic;
	uint64_t max;
	uint64_t size;
	uint64_t brk;
	uint64_t used;
	uint64_t free[34];
	uint64_t root;
};
#define MAGIC 0x53545241544d454dull

static void die(const char *what)
{
	fprintf(stderr, "holdlock: %s: %s\n", what, strerror(errno));
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: holdlock PID SECONDS\n");
		return 2;
	}
	int pid = atoi(argv[1]);
	double secs = atof(argv[2]);
	char path[128], line[1024], range[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		die(path);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/memfd:strata-agent")) {
			sscanf(line, "%63[0-9a-f-]", range);
			break;
		}
	fclose(f);
	if (!range[0]) {
		fprintf(stderr, "holdlock: process %d has no strata region\n", pid);
		return 2;
	}
	snprintf(path, sizeof(path), "/proc/%d/map_files/%s", pid, range);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die(path);
	struct stat st;
	if (fstat(fd, &st))
		die("fstat");
	uint8_t *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		die("mmap");
	struct header *h = (struct header *)base;
	if (h->magic != MAGIC || !h->root || h->root + sizeof(struct agent_state) > (uint64_t)st.st_size) {
		fprintf(stderr, "holdlock: the region does not look like strata's (layout changed?)\n");
		return 2;
	}
	struct agent_state *a = (struct agent_state *)(base + h->root);
	if (a->pid != pid) {
		fprintf(stderr, "holdlock: the region's state names process %d, not %d\n", (int)a->pid, pid);
		return 2;
	}
	int rc = pthread_mutex_lock(&a->reg_lock);
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&a->reg_lock);
	else if (rc) {
		errno = rc;
		die("pthread_mutex_lock");
	}
	printf("held\n");
	fflush(stdout);
	usleep((useconds_t)(secs * 1e6));
	pthread_mutex_unlock(&a->reg_lock);
	printf("released\n");
	fflush(stdout);
	return 0;
}
