/*
 * labels.c — frame labels shared by the exporters; see labels.h.
 */
#include "labels.h"

#include <stdio.h>
#include <string.h>

#include "common/format.h"

const char *path_base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* An unnamed native function is called "object+0xOFFSET" already. */
static int names_module(const char *name, const char *base)
{
	size_t n = strlen(base);
	return !strncmp(name, base, n) && !strncmp(name + n, "+0x", 3);
}

size_t frame_label(const struct profile *p, uint32_t f, int flags, char *buf, size_t n)
{
	if (!n)
		return 0;
	const struct pframe *fr = &p->frames[f];
	const struct pfunc *fn = &p->funcs[fr->func];
	const char *file = fn->file && *fn->file ? fn->file : NULL;
	int len;
	if (file && (flags & LABEL_BASENAME))
		file = path_base(file);
	if (fn->kind == PK_OTHER)
		len = snprintf(buf, n, "%s", fn->name);
	else if (file && fr->line && !(flags & LABEL_NO_LINE))
		len = snprintf(buf, n, "%s (%s:%u)", fn->name, file, fr->line);
	else if (file)
		len = snprintf(buf, n, "%s (%s)", fn->name, file);
	else if (fn->module && !names_module(fn->name, path_base(fn->module)))
		len = snprintf(buf, n, "%s (%s)", fn->name, path_base(fn->module));
	else
		len = snprintf(buf, n, "%s", fn->name);
	if (len < 0)
		len = 0;
	if ((size_t)len < n)
		return (size_t)len;
	/* Cut: do not leave half a UTF-8 character at the end. */
	size_t end = n - 1, i = end;
	while (i > 0 && ((unsigned char)buf[i - 1] & 0xc0) == 0x80)
		i--;
	if (i > 0) {
		unsigned char lead = (unsigned char)buf[i - 1];
		size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
		if (i - 1 + need > end)
			end = i - 1;
	}
	buf[end] = 0;
	return end;
}

const char *python_object(const struct profile *p)
{
	const char *exe = NULL;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const char *x = p->procs[i].executable;
		if (!x || !*x || (p->procs[i].flags & PROC_UNSUPPORTED))
			continue;
		if (exe && strcmp(exe, x) != 0)
			return "python";
		exe = x;
	}
	return exe ? exe : "python";
}
