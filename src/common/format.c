/*
 * format.c — framing and record bodies of the .strata format; see format.h
 * and docs/format.md. Decoders never trust a count: every array length is
 * checked against the bytes left before anything is allocated.
 */
#include "format.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* ---- file header ------------------------------------------------------ */

void file_header_pack(uint8_t out[STRATA_FILE_HDR_SIZE], const struct file_header *h)
{
	memset(out, 0, STRATA_FILE_HDR_SIZE);
	memcpy(out, STRATA_MAGIC, STRATA_MAGIC_LEN);
	out[8] = (uint8_t)h->major;
	out[9] = (uint8_t)(h->major >> 8);
	out[10] = (uint8_t)h->minor;
	out[11] = (uint8_t)(h->minor >> 8);
	put_le32(out + 12, STRATA_FILE_HDR_SIZE);
	put_le64(out + 16, h->created_ns);
	put_le32(out + 24, h->flags);
	put_le32(out + 28, crc32c(0, out, 28));
}

int file_header_parse(const uint8_t *p, size_t n, struct file_header *h)
{
	if (n < STRATA_MAGIC_LEN || memcmp(p, STRATA_MAGIC, STRATA_MAGIC_LEN) != 0)
		return n < STRATA_MAGIC_LEN && memcmp(p, STRATA_MAGIC, n) == 0 ? FMT_E_SHORT : FMT_E_MAGIC;
	if (n < 16)
		return FMT_E_SHORT;
	h->major = (uint16_t)(p[8] | p[9] << 8);
	h->minor = (uint16_t)(p[10] | p[11] << 8);
	h->header_size = le32_at(p + 12);
	/* The version is checked before the CRC: a newer major version may have
	 * a different header layout, and "newer version" is the useful message. */
	if (h->major > STRATA_FMT_MAJOR)
		return FMT_E_VERSION;
	if (h->major == 0 || h->header_size < STRATA_FILE_HDR_SIZE || h->header_size > 4096)
		return FMT_E_SIZE;
	/* Only the first STRATA_FILE_HDR_SIZE bytes are interpreted (and
	 * checksummed); a longer header from a newer minor version is
	 * skipped by the reader. */
	if (n < STRATA_FILE_HDR_SIZE)
		return FMT_E_SHORT;
	if (crc32c(0, p, 28) != le32_at(p + 28))
		return FMT_E_HDRCRC;
	h->created_ns = le64_at(p + 16);
	h->flags = le32_at(p + 24);
	return FMT_OK;
}

/* ---- chunks ----------------------------------------------------------- */

void chunk_header_pack(uint8_t out[STRATA_CHUNK_HDR_SIZE], const struct chunk_header *h)
{
	memset(out, 0, STRATA_CHUNK_HDR_SIZE);
	put_le32(out, STRATA_CHUNK_MAGIC);
	put_le64(out + 8, h->stream);
	put_le32(out + 16, h->seq);
	out[20] = (uint8_t)h->codec;
	out[21] = (uint8_t)(h->codec >> 8);
	out[22] = (uint8_t)h->flags;
	out[23] = (uint8_t)(h->flags >> 8);
	put_le32(out + 24, h->raw_size);
	put_le32(out + 28, h->stored_size);
	put_le32(out + 32, h->payload_crc);
	put_le32(out + 4, crc32c(0, out + 8, STRATA_CHUNK_HDR_SIZE - 8));
}

int chunk_header_parse(const uint8_t *p, struct chunk_header *h)
{
	if (le32_at(p) != STRATA_CHUNK_MAGIC)
		return FMT_E_MAGIC;
	if (crc32c(0, p + 8, STRATA_CHUNK_HDR_SIZE - 8) != le32_at(p + 4))
		return FMT_E_HDRCRC;
	h->stream = le64_at(p + 8);
	h->seq = le32_at(p + 16);
	h->codec = (uint16_t)(p[20] | p[21] << 8);
	h->flags = (uint16_t)(p[22] | p[23] << 8);
	h->raw_size = le32_at(p + 24);
	h->stored_size = le32_at(p + 28);
	h->payload_crc = le32_at(p + 32);
	if (h->raw_size > STRATA_CHUNK_MAX_RAW || h->stored_size > STRATA_CHUNK_MAX_STORED)
		return FMT_E_SIZE;
	return FMT_OK;
}

/* Writes the header of the chunk whose payload is already at start + the
 * header's size, and ends the chunk there. */
static void chunk_finish(struct wbuf *out, size_t start, size_t raw_len, size_t stored, uint16_t codec,
			 uint64_t stream, uint32_t seq, uint16_t flags)
{
	uint8_t *payload = out->data + start + STRATA_CHUNK_HDR_SIZE;
	struct chunk_header h = {
		.stream = stream,
		.seq = seq,
		.codec = codec,
		.flags = flags,
		.raw_size = (uint32_t)raw_len,
		.stored_size = (uint32_t)stored,
		.payload_crc = crc32c(0, payload, stored),
	};
	chunk_header_pack(out->data + start, &h);
	out->len = start + STRATA_CHUNK_HDR_SIZE + stored;
}

int chunk_seal(struct wbuf *out, const void *raw, size_t raw_len, uint64_t stream, uint32_t seq,
	       uint16_t flags, int level)
{
	if (raw_len > STRATA_CHUNK_MAX_RAW)
		return -1;
	size_t bound = ZSTD_compressBound(raw_len);
	size_t start = out->len;
	if (wbuf_reserve(out, STRATA_CHUNK_HDR_SIZE + bound))
		return -1;
	uint8_t *payload = out->data + start + STRATA_CHUNK_HDR_SIZE;
	size_t stored = ZSTD_compress(payload, bound, raw, raw_len, level);
	uint16_t codec = CODEC_ZSTD;
	if (ZSTD_isError(stored) || stored >= raw_len) {
		/* Incompressible (or tiny) payloads are stored as they are. */
		memcpy(payload, raw, raw_len);
		stored = raw_len;
		codec = CODEC_NONE;
	}
	chunk_finish(out, start, raw_len, stored, codec, stream, seq, flags);
	return 0;
}

int chunk_seal_stored(struct wbuf *out, const void *raw, size_t raw_len, uint64_t stream, uint32_t seq,
		      uint16_t flags)
{
	if (raw_len > STRATA_CHUNK_MAX_RAW)
		return -1;
	size_t start = out->len;
	if (wbuf_reserve(out, STRATA_CHUNK_HDR_SIZE + raw_len))
		return -1;
	memcpy(out->data + start + STRATA_CHUNK_HDR_SIZE, raw, raw_len);
	chunk_finish(out, start, raw_len, raw_len, CODEC_NONE, stream, seq, flags);
	return 0;
}

int chunk_open(const struct chunk_header *h, const uint8_t *stored, struct wbuf *out)
{
	wbuf_reset(out);
	if (crc32c(0, stored, h->stored_size) != h->payload_crc)
		return FMT_E_CRC;
	if (wbuf_reserve(out, h->raw_size ? h->raw_size : 1))
		return FMT_E_OOM;
	switch (h->codec) {
	case CODEC_NONE:
		if (h->stored_size != h->raw_size)
			return FMT_E_SIZE;
		memcpy(out->data, stored, h->raw_size);
		break;
	case CODEC_ZSTD: {
		size_t n = ZSTD_decompress(out->data, h->raw_size, stored, h->stored_size);
		if (ZSTD_isError(n) || n != h->raw_size)
			return FMT_E_DECOMPRESS;
		break;
	}
	default:
		return FMT_E_CODEC;
	}
	out->len = h->raw_size;
	return FMT_OK;
}

const char *fmt_strerror(int err)
{
	switch (err) {
	case FMT_OK: return "ok";
	case FMT_E_SHORT: return "file is too short";
	case FMT_E_MAGIC: return "not a .strata file";
	case FMT_E_VERSION: return "written by a newer strata";
	case FMT_E_HDRCRC: return "header checksum mismatch";
	case FMT_E_CRC: return "checksum mismatch";
	case FMT_E_CODEC: return "unknown compression codec";
	case FMT_E_DECOMPRESS: return "decompression failed";
	case FMT_E_SIZE: return "implausible size field";
	case FMT_E_OOM: return "out of memory";
	}
	return "unknown error";
}

const char *rec_type_name(uint64_t t)
{
	static const char *names[] = {
		[REC_SESSION] = "session", [REC_SESSION_END] = "session-end",
		[REC_PROCESS] = "process", [REC_PROCESS_END] = "process-end",
		[REC_THREAD] = "thread", [REC_THREAD_NAME] = "thread-name",
		[REC_THREAD_END] = "thread-end", [REC_CODE] = "code",
		[REC_STACK] = "stack", [REC_SAMPLE] = "sample",
		[REC_DROPPED] = "dropped", [REC_MODULE] = "module",
		[REC_JIT_IMAGE] = "jit-image", [REC_JIT_UNLOAD] = "jit-unload",
		[REC_PERFMAP] = "perf-map", [REC_EVENT_DESC] = "event-desc",
		[REC_CONTROL] = "control", [REC_OBJ_TYPE] = "obj-type",
		[REC_ALLOC] = "alloc", [REC_ALLOC_TYPE] = "alloc-type",
		[REC_FREE] = "free", [REC_TASK] = "task", [REC_NOTE] = "note",
	};
	if (t < sizeof(names) / sizeof(names[0]) && names[t])
		return names[t];
	return "unknown";
}

int rec_type_known(uint64_t t)
{
	if (t == 0 || t > REC_TYPE_MAX_KNOWN || t == REC_CONTROL)
		return 0; /* REC_CONTROL is reserved: no writer makes it yet */
	return 1;
}

/* ---- record framing --------------------------------------------------- */

void rec_put_raw(struct wbuf *b, uint32_t type, const void *body, size_t len)
{
	wbuf_uv(b, type);
	wbuf_bytes(b, body, len);
}

/* Bodies are built in a scratch buffer so the length prefix is exact. The
 * scratch is per call (records are small); the agent's writer thread is the
 * only agent caller, so no locking is involved. */
#define BODY_BEGIN(b) struct wbuf body_; wbuf_init(&body_); struct wbuf *o = &body_
#define BODY_END(b, type)                                                           \
	do {                                                                         \
		if (o->oom)                                                          \
			(b)->oom = 1;                                                \
		else                                                                 \
			rec_put_raw((b), (type), o->data, o->len);                   \
		wbuf_free(o);                                                        \
	} while (0)

static void put_strv(struct wbuf *o, uint32_t n, char *const *v)
{
	wbuf_uv(o, n);
	for (uint32_t i = 0; i < n; i++)
		wbuf_str(o, v[i]);
}

void rec_put_session(struct wbuf *b, const struct rec_session *r)
{
	BODY_BEGIN(b);
	wbuf_str(o, r->strata_version);
	wbuf_uv(o, r->start_realtime_ns);
	wbuf_uv(o, r->start_mono_ns);
	put_strv(o, r->argc, r->argv);
	wbuf_uv(o, r->mode);
	wbuf_uv(o, r->rate_hz);
	wbuf_uv(o, r->flags);
	put_strv(o, r->nevents, r->events);
	wbuf_str(o, r->hostname);
	BODY_END(b, REC_SESSION);
}

void rec_put_session_end(struct wbuf *b, const struct rec_session_end *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->end_mono_ns);
	wbuf_sv(o, r->status);
	BODY_END(b, REC_SESSION_END);
}

void rec_put_process(struct wbuf *b, const struct rec_process *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->pid);
	wbuf_uv(o, r->ppid);
	wbuf_uv(o, r->start_mono_ns);
	wbuf_str(o, r->python_version);
	wbuf_str(o, r->executable);
	put_strv(o, r->argc, r->argv);
	wbuf_uv(o, r->mode);
	wbuf_uv(o, r->rate_hz);
	wbuf_uv(o, r->trigger);
	wbuf_uv(o, r->period_ns);
	wbuf_uv(o, r->flags);
	put_strv(o, r->nevents, r->events);
	wbuf_uv(o, r->objects_rate);
	BODY_END(b, REC_PROCESS);
}

void rec_put_process_end(struct wbuf *b, const struct rec_process_end *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->end_mono_ns);
	wbuf_uv(o, r->reason);
	wbuf_uv(o, r->samples);
	wbuf_uv(o, r->dropped);
	BODY_END(b, REC_PROCESS_END);
}

void rec_put_thread(struct wbuf *b, const struct rec_thread *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->tid);
	wbuf_uv(o, r->start_mono_ns);
	wbuf_uv(o, r->flags);
	wbuf_str(o, r->name);
	BODY_END(b, REC_THREAD);
}

void rec_put_thread_name(struct wbuf *b, const struct rec_thread_name *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->tid);
	wbuf_str(o, r->name);
	BODY_END(b, REC_THREAD_NAME);
}

void rec_put_thread_end(struct wbuf *b, const struct rec_thread_end *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->tid);
	wbuf_uv(o, r->end_mono_ns);
	wbuf_uv(o, r->samples);
	wbuf_uv(o, r->dropped);
	BODY_END(b, REC_THREAD_END);
}

void rec_put_code(struct wbuf *b, const struct rec_code *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->index);
	wbuf_uv(o, r->addr);
	wbuf_uv(o, r->firstlineno);
	wbuf_uv(o, r->linetable_fmt);
	wbuf_uv(o, r->flags);
	wbuf_str(o, r->filename);
	wbuf_str(o, r->name);
	wbuf_str(o, r->qualname);
	wbuf_bytes(o, r->linetable, r->linetable_len);
	BODY_END(b, REC_CODE);
}

void rec_put_stack(struct wbuf *b, const struct rec_stack *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->index);
	wbuf_uv(o, r->flags);
	wbuf_uv(o, r->npy);
	for (uint32_t i = 0; i < r->npy; i++) {
		wbuf_uv(o, r->py[i].code);
		wbuf_sv(o, r->py[i].lasti);
		wbuf_uv(o, r->py[i].flags);
	}
	wbuf_uv(o, r->py_missing);
	wbuf_uv(o, r->nnative);
	/* Return addresses are delta-coded against the previous one: frames of
	 * one module sit close together, so most deltas are short. */
	uint64_t prev = 0;
	for (uint32_t i = 0; i < r->nnative; i++) {
		wbuf_sv(o, (int64_t)(r->native[i] - prev));
		prev = r->native[i];
	}
	if (r->ntasks || r->loop_at) {
		wbuf_uv(o, r->ntasks);
		for (uint32_t i = 0; i < r->ntasks; i++) {
			wbuf_uv(o, r->tasks[i].at);
			wbuf_uv(o, r->tasks[i].task);
			wbuf_uv(o, r->tasks[i].flags);
		}
		wbuf_uv(o, r->loop_at);
	}
	BODY_END(b, REC_STACK);
}

void rec_put_sample(struct wbuf *b, const struct rec_sample *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->tid);
	wbuf_sv(o, r->dt_ns);
	wbuf_uv(o, r->stack);
	wbuf_uv(o, r->weight);
	wbuf_uv(o, r->flags);
	uint32_t n = r->ncounters > STRATA_MAX_COUNTERS ? STRATA_MAX_COUNTERS : r->ncounters;
	wbuf_uv(o, n);
	for (uint32_t i = 0; i < n; i++)
		wbuf_uv(o, r->counters[i]);
	if (r->wait)
		wbuf_uv(o, r->wait);
	BODY_END(b, REC_SAMPLE);
}

void rec_put_dropped(struct wbuf *b, const struct rec_dropped *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->tid);
	wbuf_uv(o, r->count);
	BODY_END(b, REC_DROPPED);
}

void rec_put_note(struct wbuf *b, const struct rec_note *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->tid);
	wbuf_uv(o, r->time_ns);
	wbuf_uv(o, r->kind);
	wbuf_str(o, r->text);
	BODY_END(b, REC_NOTE);
}

int rec_next(struct rbuf *payload, uint64_t *type, struct rbuf *body)
{
	if (payload->err)
		return -1;
	if (rbuf_left(payload) == 0)
		return 0;
	*type = rbuf_uv(payload);
	size_t n;
	const uint8_t *p = rbuf_bytes(payload, &n);
	if (payload->err)
		return -1;
	rbuf_init(body, p, n);
	return 1;
}

/* ---- decoders --------------------------------------------------------- */

static uint32_t get_u32(struct rbuf *b)
{
	uint64_t v = rbuf_uv(b);
	if (v > UINT32_MAX)
		b->err = 1;
	return (uint32_t)v;
}

static void free_strv(uint32_t n, char **v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Each string takes at least one byte, so a count above the bytes left is
 * malformed; checking first keeps garbage from driving a huge calloc. */
static char **get_strv(struct rbuf *b, uint32_t *n)
{
	*n = get_u32(b);
	if (b->err || *n > rbuf_left(b)) {
		b->err = 1;
		*n = 0;
		return NULL;
	}
	char **v = calloc(*n + 1, sizeof(char *));
	if (!v) {
		b->err = 1;
		*n = 0;
		return NULL;
	}
	for (uint32_t i = 0; i < *n; i++) {
		v[i] = rbuf_strdup(b);
		if (b->err) {
			free_strv(i, v);
			*n = 0;
			return NULL;
		}
	}
	return v;
}

void rec_free_session(struct rec_session *r)
{
	free(r->strata_version);
	free_strv(r->argc, r->argv);
	free_strv(r->nevents, r->events);
	free(r->hostname);
	memset(r, 0, sizeof(*r));
}

int rec_get_session(struct rbuf *b, struct rec_session *r)
{
	memset(r, 0, sizeof(*r));
	r->strata_version = rbuf_strdup(b);
	r->start_realtime_ns = rbuf_uv(b);
	r->start_mono_ns = rbuf_uv(b);
	r->argv = get_strv(b, &r->argc);
	r->mode = get_u32(b);
	r->rate_hz = get_u32(b);
	r->flags = get_u32(b);
	r->events = get_strv(b, &r->nevents);
	r->hostname = rbuf_strdup(b);
	if (b->err) {
		rec_free_session(r);
		return -1;
	}
	return 0;
}

int rec_get_session_end(struct rbuf *b, struct rec_session_end *r)
{
	memset(r, 0, sizeof(*r));
	r->end_mono_ns = rbuf_uv(b);
	r->status = rbuf_sv(b);
	return b->err ? -1 : 0;
}

void rec_free_process(struct rec_process *r)
{
	free(r->python_version);
	free(r->executable);
	free_strv(r->argc, r->argv);
	free_strv(r->nevents, r->events);
	memset(r, 0, sizeof(*r));
}

int rec_get_process(struct rbuf *b, struct rec_process *r)
{
	memset(r, 0, sizeof(*r));
	r->pid = get_u32(b);
	r->ppid = get_u32(b);
	r->start_mono_ns = rbuf_uv(b);
	r->python_version = rbuf_strdup(b);
	r->executable = rbuf_strdup(b);
	r->argv = get_strv(b, &r->argc);
	r->mode = get_u32(b);
	r->rate_hz = get_u32(b);
	r->trigger = get_u32(b);
	r->period_ns = rbuf_uv(b);
	r->flags = get_u32(b);
	r->events = get_strv(b, &r->nevents);
	if (!b->err && rbuf_left(b))
		r->objects_rate = rbuf_uv(b); /* 1.1 */
	if (b->err) {
		rec_free_process(r);
		return -1;
	}
	return 0;
}

int rec_get_process_end(struct rbuf *b, struct rec_process_end *r)
{
	memset(r, 0, sizeof(*r));
	r->end_mono_ns = rbuf_uv(b);
	r->reason = get_u32(b);
	r->samples = rbuf_uv(b);
	r->dropped = rbuf_uv(b);
	return b->err ? -1 : 0;
}

void rec_free_thread(struct rec_thread *r)
{
	free(r->name);
	memset(r, 0, sizeof(*r));
}

int rec_get_thread(struct rbuf *b, struct rec_thread *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = get_u32(b);
	r->start_mono_ns = rbuf_uv(b);
	r->flags = get_u32(b);
	r->name = rbuf_strdup(b);
	if (b->err) {
		rec_free_thread(r);
		return -1;
	}
	return 0;
}

void rec_free_thread_name(struct rec_thread_name *r)
{
	free(r->name);
	memset(r, 0, sizeof(*r));
}

int rec_get_thread_name(struct rbuf *b, struct rec_thread_name *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = get_u32(b);
	r->name = rbuf_strdup(b);
	if (b->err) {
		rec_free_thread_name(r);
		return -1;
	}
	return 0;
}

int rec_get_thread_end(struct rbuf *b, struct rec_thread_end *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = get_u32(b);
	r->end_mono_ns = rbuf_uv(b);
	r->samples = rbuf_uv(b);
	r->dropped = rbuf_uv(b);
	return b->err ? -1 : 0;
}

void rec_free_code(struct rec_code *r)
{
	free(r->filename);
	free(r->name);
	free(r->qualname);
	free(r->linetable);
	memset(r, 0, sizeof(*r));
}

int rec_get_code(struct rbuf *b, struct rec_code *r)
{
	memset(r, 0, sizeof(*r));
	r->index = get_u32(b);
	r->addr = rbuf_uv(b);
	r->firstlineno = get_u32(b);
	r->linetable_fmt = get_u32(b);
	r->flags = get_u32(b);
	r->filename = rbuf_strdup(b);
	r->name = rbuf_strdup(b);
	r->qualname = rbuf_strdup(b);
	size_t n = 0;
	const uint8_t *lt = rbuf_bytes(b, &n);
	if (!b->err && n) {
		r->linetable = malloc(n);
		if (!r->linetable)
			b->err = 1;
		else {
			memcpy(r->linetable, lt, n);
			r->linetable_len = n;
		}
	}
	if (b->err) {
		rec_free_code(r);
		return -1;
	}
	return 0;
}

void rec_free_stack(struct rec_stack *r)
{
	free(r->py);
	free(r->native);
	free(r->tasks);
	memset(r, 0, sizeof(*r));
}

int rec_get_stack(struct rbuf *b, struct rec_stack *r)
{
	memset(r, 0, sizeof(*r));
	r->index = get_u32(b);
	r->flags = get_u32(b);
	r->npy = get_u32(b);
	/* Each Python frame takes at least 3 bytes. */
	if (b->err || r->npy > rbuf_left(b) / 3)
		goto bad;
	if (r->npy && !(r->py = calloc(r->npy, sizeof(*r->py))))
		goto bad;
	for (uint32_t i = 0; i < r->npy; i++) {
		r->py[i].code = get_u32(b);
		int64_t l = rbuf_sv(b);
		if (l < INT32_MIN || l > INT32_MAX)
			b->err = 1;
		r->py[i].lasti = (int32_t)l;
		r->py[i].flags = get_u32(b);
	}
	r->py_missing = get_u32(b);
	r->nnative = get_u32(b);
	if (b->err || r->nnative > rbuf_left(b))
		goto bad;
	if (r->nnative && !(r->native = calloc(r->nnative, sizeof(*r->native))))
		goto bad;
	uint64_t prev = 0;
	for (uint32_t i = 0; i < r->nnative; i++) {
		prev += (uint64_t)rbuf_sv(b);
		r->native[i] = prev;
	}
	if (!b->err && rbuf_left(b)) {
		/* 1.2: task boundaries, each at a frame of the stack. */
		r->ntasks = get_u32(b);
		if (b->err || r->ntasks > rbuf_left(b) / 3 || r->ntasks > r->npy)
			goto bad;
		if (r->ntasks && !(r->tasks = calloc(r->ntasks, sizeof(*r->tasks))))
			goto bad;
		for (uint32_t i = 0; i < r->ntasks; i++) {
			r->tasks[i].at = get_u32(b);
			r->tasks[i].task = get_u32(b);
			r->tasks[i].flags = get_u32(b);
			if (r->tasks[i].at >= r->npy)
				b->err = 1;
		}
		r->loop_at = get_u32(b);
		if (r->loop_at > r->npy)
			b->err = 1;
	}
	if (b->err)
		goto bad;
	return 0;
bad:
	rec_free_stack(r);
	return -1;
}

int rec_get_sample(struct rbuf *b, struct rec_sample *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = get_u32(b);
	r->dt_ns = rbuf_sv(b);
	r->stack = get_u32(b);
	r->weight = get_u32(b);
	r->flags = get_u32(b);
	uint32_t n = get_u32(b);
	for (uint32_t i = 0; i < n && !b->err; i++) {
		uint64_t v = rbuf_uv(b);
		if (i < STRATA_MAX_COUNTERS)
			r->counters[i] = v;
	}
	r->ncounters = n > STRATA_MAX_COUNTERS ? STRATA_MAX_COUNTERS : n;
	if (!b->err && rbuf_left(b))
		r->wait = get_u32(b); /* 1.3 */
	return b->err ? -1 : 0;
}

int rec_get_dropped(struct rbuf *b, struct rec_dropped *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = get_u32(b);
	r->count = rbuf_uv(b);
	return b->err ? -1 : 0;
}

int rec_get_note(struct rbuf *b, struct rec_note *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = get_u32(b);
	r->time_ns = rbuf_uv(b);
	r->kind = get_u32(b);
	r->text = rbuf_strdup(b);
	if (b->err) {
		rec_free_note(r);
		return -1;
	}
	return 0;
}

void rec_free_note(struct rec_note *r)
{
	free(r->text);
	memset(r, 0, sizeof(*r));
}

void rec_put_module(struct wbuf *b, const struct rec_module *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->start);
	wbuf_uv(o, r->end);
	wbuf_uv(o, r->offset);
	wbuf_uv(o, r->bias);
	wbuf_uv(o, r->flags);
	wbuf_str(o, r->path);
	wbuf_bytes(o, r->build_id, r->build_id_len);
	wbuf_bytes(o, r->image, r->image_len);
	BODY_END(b, REC_MODULE);
}

void rec_free_module(struct rec_module *r)
{
	free(r->path);
	free(r->build_id);
	free(r->image);
	memset(r, 0, sizeof(*r));
}

static uint8_t *dup_bytes(struct rbuf *b, size_t *n)
{
	const uint8_t *p = rbuf_bytes(b, n);
	if (!p || !*n)
		return NULL;
	uint8_t *c = malloc(*n);
	if (!c) {
		b->err = 1;
		*n = 0;
		return NULL;
	}
	memcpy(c, p, *n);
	return c;
}

int rec_get_module(struct rbuf *b, struct rec_module *r)
{
	memset(r, 0, sizeof(*r));
	r->start = rbuf_uv(b);
	r->end = rbuf_uv(b);
	r->offset = rbuf_uv(b);
	r->bias = rbuf_uv(b);
	r->flags = get_u32(b);
	r->path = rbuf_strdup(b);
	r->build_id = dup_bytes(b, &r->build_id_len);
	r->image = dup_bytes(b, &r->image_len);
	if (b->err || r->end < r->start || !r->path) {
		rec_free_module(r);
		return -1;
	}
	return 0;
}

void rec_put_event_desc(struct wbuf *b, const struct rec_event_desc *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->index);
	wbuf_str(o, r->name);
	wbuf_uv(o, r->type);
	wbuf_uv(o, r->config);
	wbuf_uv(o, r->period);
	wbuf_uv(o, r->flags);
	BODY_END(b, REC_EVENT_DESC);
}

void rec_free_event_desc(struct rec_event_desc *r)
{
	free(r->name);
	memset(r, 0, sizeof(*r));
}

int rec_get_event_desc(struct rbuf *b, struct rec_event_desc *r)
{
	memset(r, 0, sizeof(*r));
	r->index = get_u32(b);
	r->name = rbuf_strdup(b);
	r->type = get_u32(b);
	r->config = rbuf_uv(b);
	r->period = rbuf_uv(b);
	r->flags = get_u32(b);
	if (b->err || !r->name) {
		rec_free_event_desc(r);
		return -1;
	}
	return 0;
}

void rec_put_jit_image(struct wbuf *b, const struct rec_jit_image *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->id);
	wbuf_uv(o, r->start);
	wbuf_uv(o, r->end);
	wbuf_uv(o, r->time_ns);
	wbuf_uv(o, r->flags);
	wbuf_bytes(o, r->image, r->image_len);
	BODY_END(b, REC_JIT_IMAGE);
}

void rec_free_jit_image(struct rec_jit_image *r)
{
	free(r->image);
	memset(r, 0, sizeof(*r));
}

int rec_get_jit_image(struct rbuf *b, struct rec_jit_image *r)
{
	memset(r, 0, sizeof(*r));
	r->id = rbuf_uv(b);
	r->start = rbuf_uv(b);
	r->end = rbuf_uv(b);
	r->time_ns = rbuf_uv(b);
	r->flags = get_u32(b);
	r->image = dup_bytes(b, &r->image_len);
	if (b->err || r->end < r->start || !r->image) {
		rec_free_jit_image(r);
		return -1;
	}
	return 0;
}

void rec_put_jit_unload(struct wbuf *b, const struct rec_jit_unload *r)
{
	BODY_BEGIN(b);
	wbuf_uv(o, r->id);
	wbuf_uv(o, r->time_ns);
	BODY_END(b, REC_JIT_UNLOAD);
}

int rec_get_jit_unload(struct rbuf *b, struct rec_jit_unload *r)
{
	memset(r, 0, sizeof(*r));
	r->id = rbuf_uv(b);
	r->time_ns = rbuf_uv(b);
	return b->err ? -1 : 0;
}
