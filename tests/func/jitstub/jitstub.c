/*
 * jitstub.c — TEST ONLY. A stand-in for the agent's JIT discovery (jit.c),
 * so that `strata record --perf-map` can be tested on a build without it:
 * preloaded after the agent, it defines jit_add_listener (the agent only
 * references it weakly) and polls every loaded object's
 * __jit_debug_descriptor from a thread, handing each new image to the
 * listener. It races with the JIT by design (a test harness, not a
 * profiler); the real jit.c, once linked into the agent, takes precedence
 * and this library is then never called.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../../../src/agent/jit.h"

struct jit_code_entry {
	struct jit_code_entry *next, *prev;
	const char *symfile_addr;
	uint64_t symfile_size;
};
struct jit_descriptor {
	uint32_t version, action_flag;
	struct jit_code_entry *relevant_entry, *first_entry;
};

static jit_listener listener;
static const void *seen[4096];
static unsigned nseen;
static struct jit_descriptor *descs[8];
static unsigned ndescs;

/* Object names first (dlopen inside dl_iterate_phdr's callback would
 * deadlock on the loader's lock), then each one's descriptor. */
static char names[512][256];
static unsigned nnames;

static int name_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (nnames < 512)
		snprintf(names[nnames++], 256, "%s", info->dlpi_name ? info->dlpi_name : "");
	return 0;
}

static void find_descriptors(void)
{
	nnames = 0;
	dl_iterate_phdr(name_cb, NULL);
	for (unsigned k = 0; k < nnames; k++) {
		void *h = dlopen(names[k][0] ? names[k] : NULL, RTLD_NOW | RTLD_NOLOAD);
		if (!h)
			continue;
		struct jit_descriptor *d = dlsym(h, "__jit_debug_descriptor");
		int known = 0;
		for (unsigned i = 0; i < ndescs; i++)
			known |= descs[i] == d;
		if (d && !known && ndescs < 8)
			descs[ndescs++] = d;
		dlclose(h);
	}
}

static void *poll_thread(void *arg)
{
	(void)arg;
	for (unsigned round = 0;; round++) {
		if (round % 50 == 0)
			find_descriptors();
		for (unsigned k = 0; k < ndescs; k++)
			for (struct jit_code_entry *e = descs[k]->first_entry; e; e = e->next) {
				int old = 0;
				for (unsigned i = 0; i < nseen && !old; i++)
					old = seen[i] == e->symfile_addr;
				if (old || nseen == 4096)
					continue;
				seen[nseen++] = e->symfile_addr;
				struct jit_image img = { nseen, e->symfile_addr, e->symfile_size };
				listener(&img, 1);
			}
		usleep(5000);
	}
	return NULL;
}

int jit_add_listener(jit_listener fn)
{
	if (listener)
		return -1;
	listener = fn;
	/* The raw clone: the agent's pthread_create wrapper would register
	 * this thread for sampling. */
	pthread_t t;
	int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
		dlsym(RTLD_NEXT, "pthread_create");
	return create && create(&t, NULL, poll_thread, NULL) == 0 ? 0 : -1;
}
