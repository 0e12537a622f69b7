/*
 * options.c — the agent's configuration from the environment: the
 * options string (STRATA_OPTIONS, which `strata record` writes, or what
 * the Python module passes to strata_agent_load) parsed into struct
 * agent_config; see options.h.
 *
 * In the profiled process (libstrata-agent.so), called by the agent's
 * setup (agent.c). Apart from agent.c because it is a function of a
 * string alone, with no state and nothing of the lifecycle in it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "options.h"

/* STRATA_OPTIONS: comma-separated key=value pairs written by `strata record`. */
void parse_options(struct agent_config *c, const char *s)
{
	c->mode = MODE_CPU;
	c->rate_hz = 1000;
	c->max_depth = 512;
	c->ring_size = 1u << 18;
	c->flush_ms = 100;
	c->paused = 0;
	c->native = 0;
	c->perf_map = 0;
	c->native_depth = 512; /* 3.8-3.10 run 4-6 native frames per Python frame */
	c->native_compile = 0;
	c->native_compile_fixed = 0;
	memset(&c->events, 0, sizeof(c->events));
	c->event_period = 0;
	c->send_dir[0] = 0;
	c->send_every_ms = 15000;
	c->send_queue = 8;
	/* Events are '+'-separated here: commas separate the options. */
	char evlist[512] = "";
	while (s && *s) {
		char key[32], val[512];
		const char *eq = strchr(s, '='), *end = strchr(s, ',');
		if (!end)
			end = s + strlen(s);
		if (eq && eq < end && (size_t)(eq - s) < sizeof(key) && (size_t)(end - eq - 1) < sizeof(val)) {
			memcpy(key, s, (size_t)(eq - s));
			key[eq - s] = 0;
			memcpy(val, eq + 1, (size_t)(end - eq - 1));
			val[end - eq - 1] = 0;
			unsigned long v = strtoul(val, NULL, 10);
			if (!strcmp(key, "mode"))
				c->mode = !strcmp(val, "wall") ? MODE_WALL : MODE_CPU;
			else if (!strcmp(key, "rate") && v >= 1 && v <= 100000)
				c->rate_hz = (unsigned)v;
			else if (!strcmp(key, "depth") && v >= 1 && v <= 4096)
				c->max_depth = (unsigned)v;
			else if (!strcmp(key, "ring") && v >= 4096 && v <= (1ul << 28) && !(v & (v - 1)))
				c->ring_size = (uint32_t)v;
			else if (!strcmp(key, "flush") && v >= 5 && v <= 10000)
				c->flush_ms = (int)v;
			else if (!strcmp(key, "paused"))
				c->paused = v != 0;
			else if (!strcmp(key, "native"))
				c->native = v != 0;
			else if (!strcmp(key, "perfmap"))
				c->perf_map = v != 0;
			else if (!strcmp(key, "ndepth") && v >= 1 && v <= 1024)
				c->native_depth = (unsigned)v;
			else if (!strcmp(key, "ncompile") && v <= 1000000) {
				c->native_compile = (unsigned)v;
				c->native_compile_fixed = 1;
			} else if (!strcmp(key, "events"))
				snprintf(evlist, sizeof(evlist), "%s", val);
			else if (!strcmp(key, "period"))
				c->event_period = strtoull(val, NULL, 10);
			else if (!strcmp(key, "send") && val[0] == '/')
				snprintf(c->send_dir, sizeof(c->send_dir), "%s", val);
			else if (!strcmp(key, "every") && v >= 100 && v <= 86400000)
				c->send_every_ms = (unsigned)v;
			else if (!strcmp(key, "queue") && v >= 1 && v <= 10000)
				c->send_queue = (unsigned)v;
			else if (!strcmp(key, "objects") && v >= 1) {
				c->objects = 1;
				c->objects_rate = strtoull(val, NULL, 10);
			}
		}
		s = *end ? end + 1 : end;
	}
	c->period_ns = 1000000000ull / c->rate_hz;
	if (evlist[0]) {
		char err[256];
		if (events_parse(evlist, '+', &c->events, err, sizeof(err))) {
			agent_log("%s; sampling by CPU time instead", err);
			c->events.n = 0;
		}
		else if (!c->event_period)
			c->event_period = event_default_period(&c->events.ev[0], c->rate_hz);
		else if (c->event_period < event_min_period(&c->events.ev[0]))
			c->event_period = event_min_period(&c->events.ev[0]);
	}
	/* Allocation samples come in bursts (an allocation-heavy stretch at a
	 * low --objects-rate): room for four times as many. */
	if (c->objects && c->ring_size < (1u << 20))
		c->ring_size = 1u << 20;
	/* A Python frame record is 16 bytes; the ring must hold many deep samples. */
	while (c->ring_size < 16u * (sizeof(struct rsample) + c->max_depth * sizeof(struct strata_pyframe) +
				     (c->native ? c->native_depth * 8u : 0)))
		c->ring_size *= 2;
}
