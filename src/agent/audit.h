/*
 * audit.h — strata's PEP 578 audit hooks in the profiled process: adding
 * one (before Py_Initialize or after), and what each must call first.
 */
#ifndef STRATA_AGENT_AUDIT_H
#define STRATA_AGENT_AUDIT_H

typedef int (*audit_hook_fn)(const char *event, void *args, void *data);

/* PySys_AddAuditHook(fn, data); 0, or -1 (no such function, or refused).
 * May be called before the interpreter is initialized. */
int audit_add(audit_hook_fn fn, void *data);

/* Every hook added with audit_add calls this first, with its event,
 * whatever else it does (even when the agent is off). */
void audit_event(const char *event);

#endif
