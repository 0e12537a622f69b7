/*
 * options.h — the agent's configuration from STRATA_OPTIONS (options.c).
 */
#ifndef STRATA_OPTIONS_H
#define STRATA_OPTIONS_H

struct agent_config;

/* Fills c from STRATA_OPTIONS's comma-separated key=value pairs (s may be
 * NULL): defaults for what s does not say, out-of-range values ignored. */
void parse_options(struct agent_config *c, const char *s);

#endif
