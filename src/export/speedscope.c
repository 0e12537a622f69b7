/*
 * speedscope.c — `-f speedscope`: speedscope's own file format
 * (https://www.speedscope.app/file-format-schema.json).
 *
 *   shared.frames   one per model frame that a sample uses: name is the
 *                   frame's label (labels.h, file basename), plus its
 *                   full `file` and `line`
 *   profiles        one "sampled" profile per thread that has samples,
 *                   named "process (pid) · thread (tid)"; each sample is
 *                   its stack as frame indices, root first; and one per
 *                   asyncio task, "process (pid) · task NAME", with the
 *                   task's samples running and waiting (a thread's
 *                   profile then holds only the thread's own samples:
 *                   docs/async.md)
 *   weights         the shown event: for samples, the sampling period in
 *                   nanoseconds times the sample's weight (speedscope then
 *                   shows CPU or wall time); for a counter, its count
 *                   with unit "none"
 *
 * Consecutive samples of a thread with the same stack become one sample
 * with their summed weight: speedscope's time-ordered view would draw
 * them as one box anyway, and it keeps files of long steady runs small.
 * The thread with the most weight is the profile shown first.
 */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "labels.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

static int export_speedscope(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	struct thread_samples ts = { 0 };
	struct strcache names = { 0 };
	struct ob *b = malloc(sizeof(*b));
	uint32_t *dense = malloc((p->nframes ? p->nframes : 1) * sizeof(*dense));
	uint8_t *used = calloc(p->nnodes ? p->nnodes : 1, 1);
	uint32_t *stack = malloc(((size_t)p->nnodes + 1) * sizeof(*stack));
	uint64_t *tweight = calloc((size_t)p->nthreads + p->ntasks + 1, sizeof(*tweight));
	char (*digits)[8] = NULL;  /* up to 9,999,999 frames */
	uint8_t *dlen = NULL;
	int rc = -1;
	if (p->nframes >= 10000000) {
		snprintf(err, errlen, "too many frames for speedscope");
		free(b);
		free(dense);
		free(used);
		free(stack);
		free(tweight);
		return -1;
	}
	if (!b || !dense || !used || !stack || !tweight || tracks_build(&ts, p, o, 1) ||
	    strcache_init(&names, p->nframes)) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	int timed = o->event == 0 && p->period_ns > 0;
	uint64_t scale = timed ? p->period_ns : 1;

	/* Frames used by exported samples, numbered densely in node order. */
	for (uint32_t t = 0; t < ts.ntracks; t++)
		for (uint64_t k = ts.start[t]; k < ts.start[t + 1]; k++) {
			uint64_t i = ts.idx[k];
			uint64_t v = profile_value(p, i, o->event);
			if (v && p->samples[i].node < p->nnodes) {
				used[p->samples[i].node] = 1;
				tweight[t] += v;
			}
		}
	for (uint32_t n = p->nnodes; n-- > 1;)
		if (used[n] && p->nodes[n].parent != PNONE)
			used[p->nodes[n].parent] = 1;
	for (uint32_t f = 0; f < p->nframes; f++)
		dense[f] = PNONE;
	uint32_t nused = 0;

	ob_init(b, out);
	ob_puts(b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\"exporter\":\"strata " STRATA_VERSION "\",\"name\":");
	ob_json_str(b, o->title && *o->title ? o->title : "strata profile");
	ob_puts(b, ",\n\"shared\":{\"frames\":[");
	for (uint32_t n = 1; n < p->nnodes; n++) {
		uint32_t f = p->nodes[n].frame;
		if (!used[n] || f >= p->nframes || dense[f] != PNONE)
			continue;
		dense[f] = nused;
		uint32_t len;
		const char *name = frame_label_cached(&names, p, f, LABEL_BASENAME, 'j', &len);
		if (!name) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		const struct pfunc *fn = &p->funcs[p->frames[f].func];
		ob_puts(b, nused ? ",\n{\"name\":" : "\n{\"name\":");
		ob_write(b, name, len);
		if (fn->kind != PK_OTHER && fn->file && *fn->file) {
			ob_puts(b, ",\"file\":");
			ob_json_str(b, fn->file);
			if (p->frames[f].line) {
				ob_puts(b, ",\"line\":");
				ob_u64(b, p->frames[f].line);
			}
		} else if (fn->kind != PK_OTHER && fn->module) {
			ob_puts(b, ",\"file\":");
			ob_json_str(b, fn->module);
		}
		ob_putc(b, '}');
		nused++;
	}
	ob_puts(b, "]},\n\"profiles\":[");
	/* Each dense frame index as text with its comma: "123," */
	if (!(digits = malloc((nused ? nused : 1) * sizeof(*digits))) || !(dlen = malloc(nused ? nused : 1))) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	for (uint32_t k = 0; k < nused; k++)
		dlen[k] = (uint8_t)snprintf(digits[k], sizeof(digits[k]), "%u,", k);

	uint32_t nprof = 0, active = 0;
	uint64_t best = 0;
	for (uint32_t t = 0; t < ts.ntracks; t++) {
		if (!tweight[t])
			continue;
		if (tweight[t] > best && t < p->nthreads) {
			best = tweight[t];
			active = nprof;
		}
		char pn[256], tn[256], full[600];
		if (t < p->nthreads) {
			process_name(p, p->threads[t].process, 1, pn, sizeof(pn));
			thread_name(p, t, 1, tn, sizeof(tn));
		} else {
			uint32_t proc;
			uint64_t t0, t1;
			task_track(p, &ts, t, tn, sizeof(tn), &proc, &t0, &t1);
			process_name(p, proc, 1, pn, sizeof(pn));
		}
		snprintf(full, sizeof(full), "%s \xC2\xB7 %s", pn, tn);
		ob_puts(b, nprof ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":");
		ob_json_str(b, full);
		ob_puts(b, timed ? ",\"unit\":\"nanoseconds\"" : ",\"unit\":\"none\"");
		ob_puts(b, ",\"startValue\":0,\"endValue\":");
		ob_u64(b, tweight[t] * scale);
		ob_puts(b, ",\n\"samples\":[");
		/* Pass 1: stacks; pass 2: the weights of the same merged runs. */
		for (int pass = 0; pass < 2; pass++) {
			uint32_t last = PNONE;
			uint64_t acc = 0;
			int first = 1;
			for (uint64_t k = ts.start[t]; k <= ts.start[t + 1]; k++) {
				uint32_t node = PNONE;
				uint64_t v = 0;
				if (k < ts.start[t + 1]) {
					uint64_t i = ts.idx[k];
					v = profile_value(p, i, o->event);
					node = p->samples[i].node;
					if (!v || node >= p->nnodes)
						continue;
					if (node == last) {
						acc += v;
						continue;
					}
				}
				if (last != PNONE) {
					if (!first)
						ob_putc(b, ',');
					first = 0;
					if (pass == 0) {
						uint32_t d = 0;
						for (uint32_t m = last; m != 0 && m != PNONE; m = p->nodes[m].parent)
							stack[d++] = dense[p->nodes[m].frame];
						/* The hot loop: "[a,b,c]" from the digit table,
						 * straight into the buffer. */
						size_t need = (size_t)d * 8 + 2;
						if (b->len + need > sizeof(b->buf))
							ob_drain(b);
						if (need > sizeof(b->buf)) {
							snprintf(err, errlen, "stack too deep");
							goto done;
						}
						char *w = b->buf + b->len;
						*w++ = '[';
						for (uint32_t j = d; j-- > 0;) {
							memcpy(w, digits[stack[j]], 8);
							w += dlen[stack[j]];
						}
						if (d)
							w--; /* the last comma */
						*w++ = ']';
						b->len = (size_t)(w - b->buf);
					} else {
						ob_u64(b, acc * scale);
					}
				}
				last = node;
				acc = v;
			}
			ob_puts(b, pass == 0 ? "],\n\"weights\":[" : "]}");
		}
		nprof++;
	}
	ob_puts(b, "],\n\"activeProfileIndex\":");
	ob_u64(b, active);
	ob_puts(b, "}\n");
	if (ob_flush(b)) {
		snprintf(err, errlen, "write error");
		goto done;
	}
	rc = 0;
done:
	thread_samples_free(&ts);
	strcache_free(&names);
	free(b);
	free(dense);
	free(used);
	free(stack);
	free(tweight);
	free(digits);
	free(dlen);
	return rc;
}

const struct exporter speedscope_exporter = {
	"speedscope", ".speedscope.json", "speedscope (npx speedscope FILE, or www.speedscope.app)", 0,
	export_speedscope,
};
