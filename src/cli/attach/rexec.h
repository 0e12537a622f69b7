/*
 * rexec.h — loading the agent into a CPython 3.14+ process through the
 * interpreter's own hook for this, PEP 768 (what sys.remote_exec does),
 * written from C: no Python is needed on strata's side.
 *
 * strata writes a small script into a private directory, then, with the
 * process held still for a moment (ptstop.h, so that no update of the
 * interpreter's eval breaker word is lost), writes the script's path into
 * one thread state's debugger support area, sets its pending-call flag
 * and the eval breaker bit sys.remote_exec sets. The interpreter runs the
 * script in that thread at its next safe point (between two bytecodes,
 * with the GIL held). The script loads the agent with ctypes, calls
 * strata_agent_load() as `import strata` does, names the threads from
 * `threading`, writes its result, and puts sys.modules (and
 * sys.path_importer_cache) back exactly as they were. docs/attach.md.
 */
#ifndef STRATA_REXEC_H
#define STRATA_REXEC_H

#include <stddef.h>

#include "pyproc.h"

/* Loads the agent (its library at `agent`, with `options`) into the
 * process of p (whose reader is loaded) through PEP 768, waiting at most
 * timeout_ms for its interpreter to finish starting, then as long for a
 * thread to run bytecode. Returns 0 when the agent is
 * loaded; 1 when this way is not open or did not work (err says why, and
 * nothing was left pending in the process: ptrace may be tried); -1 when
 * the agent itself refused to start, or the script was taken but has not
 * finished (err says so). *wait_ms: the time until the script ran. */
int rexec_agent(struct pyproc *p, const char *agent, const char *options, int timeout_ms, double *wait_ms, char *err,
		size_t errlen);

#endif
