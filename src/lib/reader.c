/*
 * reader.c — incremental, damage-tolerant .strata reader; see reader.h.
 */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct reader {
	int fd, own_fd;
	int header_done;
	struct wbuf in;     /* bytes read but not yet consumed */
	size_t in_off;      /* consumed prefix of `in` */
	uint64_t file_off;  /* file offset of in.data[in_off] */
	struct wbuf raw;    /* decompressed payload scratch */
	struct reader_diag diag;
	struct reader_stream *streams;
	size_t nstreams, cap_streams;
	int (*alive)(uint32_t pid);
};

void reader_set_alive_check(struct reader *r, int (*alive)(uint32_t pid)) { r->alive = alive; }

static void set_err(char *err, size_t n, const char *msg)
{
	if (err && n)
		snprintf(err, n, "%s", msg);
}

struct reader *reader_open_fd(int fd, char *err, size_t errlen)
{
	struct reader *r = calloc(1, sizeof(*r));
	if (!r) {
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	r->fd = fd;
	wbuf_init(&r->in);
	wbuf_init(&r->raw);
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	size_t got = 0;
	while (got < sizeof(hdr)) {
		ssize_t n = read(fd, hdr + got, sizeof(hdr) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "cannot read: %s", strerror(errno));
			free(r);
			return NULL;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got == 0) {
		set_err(err, errlen, "file is empty (not a .strata file)");
		free(r);
		return NULL;
	}
	struct file_header fh;
	int rc = file_header_parse(hdr, got, &fh);
	if (rc == FMT_E_VERSION) {
		snprintf(err, errlen,
			 "written by a newer strata (file format %u.%u; this strata reads %d.x): upgrade strata to read it",
			 fh.major, fh.minor, STRATA_FMT_MAJOR);
		free(r);
		return NULL;
	}
	if (rc == FMT_E_MAGIC) {
		set_err(err, errlen, "not a .strata file");
		free(r);
		return NULL;
	}
	if (rc == FMT_E_SHORT) {
		set_err(err, errlen, "file is cut short inside its header");
		free(r);
		return NULL;
	}
	if (rc != FMT_OK) {
		snprintf(err, errlen, "damaged file header (%s)", fmt_strerror(rc));
		free(r);
		return NULL;
	}
	r->diag.major = fh.major;
	r->diag.minor = fh.minor;
	/* Future headers may be longer: skip the rest of it. */
	if (fh.header_size > sizeof(hdr) &&
	    lseek(fd, (off_t)fh.header_size, SEEK_SET) < 0) {
		set_err(err, errlen, "cannot seek past the file header");
		free(r);
		return NULL;
	}
	r->file_off = fh.header_size;
	r->diag.file_size = fh.header_size;
	r->header_done = 1;
	return r;
}

struct reader *reader_open(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open: %s", strerror(errno));
		return NULL;
	}
	struct reader *r = reader_open_fd(fd, err, errlen);
	if (!r) {
		close(fd);
		return NULL;
	}
	r->own_fd = 1;
	return r;
}

void reader_close(struct reader *r)
{
	if (!r)
		return;
	if (r->own_fd)
		close(r->fd);
	wbuf_free(&r->in);
	wbuf_free(&r->raw);
	free(r->streams);
	free(r);
}

const struct reader_diag *reader_diag(const struct reader *r) { return &r->diag; }

const struct reader_stream *reader_streams(const struct reader *r, size_t *n)
{
	*n = r->nstreams;
	return r->streams;
}

static struct reader_stream *stream_get(struct reader *r, uint64_t id)
{
	for (size_t i = 0; i < r->nstreams; i++)
		if (r->streams[i].id == id)
			return &r->streams[i];
	if (r->nstreams == r->cap_streams) {
		size_t cap = r->cap_streams ? r->cap_streams * 2 : 16;
		struct reader_stream *s = realloc(r->streams, cap * sizeof(*s));
		if (!s)
			return NULL;
		r->streams = s;
		r->cap_streams = cap;
	}
	struct reader_stream *s = &r->streams[r->nstreams++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	return s;
}

static void note_unknown(struct reader *r, uint64_t type)
{
	for (uint32_t i = 0; i < r->diag.nunknown; i++)
		if (r->diag.unknown[i].type == type) {
			r->diag.unknown[i].count++;
			return;
		}
	if (r->diag.nunknown < 16) {
		r->diag.unknown[r->diag.nunknown].type = type;
		r->diag.unknown[r->diag.nunknown].count = 1;
		r->diag.nunknown++;
	}
}

/* Peeks into a stream's identifying record to learn its pid. */
static void learn_pid(struct reader_stream *s, uint64_t type, const struct rbuf *body)
{
	if (s->pid)
		return;
	struct rbuf b = *body;
	if (type == REC_PROCESS) {
		uint64_t pid = rbuf_uv(&b);
		if (!b.err && pid <= UINT32_MAX)
			s->pid = (uint32_t)pid;
	}
}

static int deliver(struct reader *r, struct reader_stream *s, reader_record_fn fn, void *ctx)
{
	struct rbuf payload;
	rbuf_init(&payload, r->raw.data, r->raw.len);
	uint64_t type;
	struct rbuf body;
	int rc;
	while ((rc = rec_next(&payload, &type, &body)) == 1) {
		learn_pid(s, type, &body);
		if (!rec_type_known(type)) {
			note_unknown(r, type);
			continue;
		}
		int stop = fn ? fn(ctx, s, type, &body) : 0;
		if (stop)
			return stop;
	}
	if (rc < 0)
		r->diag.bad_records++;
	return 0;
}

/* Scans forward from `from` for the next offset holding a valid chunk
 * header; returns that offset, or where to resume if none: while tailing,
 * the last 3 bytes are kept (they may begin a magic still being written);
 * at the final read nothing more will come, so everything is skipped (a
 * damaged last chunk is damage, not a file cut short). */
static size_t resync(const uint8_t *p, size_t from, size_t len, int final)
{
	for (size_t i = from; i + 4 <= len; i++) {
		if (le32_at(p + i) != STRATA_CHUNK_MAGIC)
			continue;
		if (i + STRATA_CHUNK_HDR_SIZE > len)
			return i; /* maybe a header, not all here yet */
		struct chunk_header h;
		if (chunk_header_parse(p + i, &h) == FMT_OK)
			return i;
	}
	if (final)
		return len;
	/* Keep up to 3 trailing bytes: they may start a magic. */
	return len > from + 3 ? len - 3 : from;
}

static int fill(struct reader *r, char *err, size_t errlen)
{
	/* Drop the consumed prefix so the buffer does not grow without bound. */
	if (r->in_off) {
		memmove(r->in.data, r->in.data + r->in_off, r->in.len - r->in_off);
		r->in.len -= r->in_off;
		r->in_off = 0;
	}
	for (;;) {
		if (wbuf_reserve(&r->in, 1 << 16)) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
		ssize_t n = read(r->fd, r->in.data + r->in.len, r->in.cap - r->in.len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "read error: %s", strerror(errno));
			return -1;
		}
		if (n == 0)
			return 0;
		r->in.len += (size_t)n;
	}
}

int reader_poll(struct reader *r, int final, reader_record_fn fn, void *ctx, char *err,
		size_t errlen)
{
	if (fill(r, err, errlen) < 0)
		return -1;
	const uint8_t *p = r->in.data;
	size_t len = r->in.len;
	size_t off = r->in_off;
	int stop = 0;
	while (off < len && !stop) {
		size_t left = len - off;
		if (left < STRATA_CHUNK_HDR_SIZE)
			break;
		struct chunk_header h;
		int rc = chunk_header_parse(p + off, &h);
		if (rc != FMT_OK) {
			/* Damage: skip to the next plausible chunk. */
			size_t next = resync(p, off + 1, len, final);
			r->diag.corrupt_chunks++;
			r->diag.skipped_bytes += next - off;
			off = next;
			continue;
		}
		if (left < STRATA_CHUNK_HDR_SIZE + (size_t)h.stored_size) {
			if (!final)
				break; /* incomplete: more may come */
			/* A writer killed mid-write leaves a partial chunk that
			 * other writers may have appended after: look for one. */
			size_t next = resync(p, off + 1, len, final);
			if (next + STRATA_CHUNK_HDR_SIZE > len)
				break; /* nothing after it: the file was cut short */
			r->diag.corrupt_chunks++;
			r->diag.skipped_bytes += next - off;
			off = next;
			continue;
		}
		const uint8_t *stored = p + off + STRATA_CHUNK_HDR_SIZE;
		rc = chunk_open(&h, stored, &r->raw);
		if (rc != FMT_OK) {
			if (rc == FMT_E_OOM) {
				set_err(err, errlen, "out of memory");
				return -1;
			}
			size_t next = resync(p, off + 1, len, final);
			r->diag.corrupt_chunks++;
			r->diag.skipped_bytes += next - off;
			off = next;
			continue;
		}
		struct reader_stream *s = stream_get(r, h.stream);
		if (!s) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
		if (h.seq != s->next_seq && h.seq > s->next_seq)
			s->seq_gaps += h.seq - s->next_seq;
		s->next_seq = h.seq + 1;
		s->chunks++;
		r->diag.chunks++;
		off += STRATA_CHUNK_HDR_SIZE + h.stored_size;
		stop = deliver(r, s, fn, ctx);
		if (h.flags & CHUNK_LAST)
			s->ended = 1;
	}
	r->diag.file_size += off - r->in_off;
	r->file_off += off - r->in_off;
	r->in_off = off;
	if (final && !stop && off < len) {
		r->diag.truncated = 1;
		r->diag.truncated_at = r->file_off;
	}
	return stop;
}

int reader_report_diag(const struct reader *r, FILE *out, const char *prefix)
{
	const struct reader_diag *d = &r->diag;
	int lines = 0;
	if (d->truncated) {
		fprintf(out, "%sfile was cut short: its last chunk (at byte %llu) is incomplete; read everything before it\n",
			prefix, (unsigned long long)d->truncated_at);
		lines++;
	}
	if (d->corrupt_chunks) {
		fprintf(out, "%sskipped %llu damaged chunk(s) (%llu bytes) that failed their checksum\n", prefix,
			(unsigned long long)d->corrupt_chunks, (unsigned long long)d->skipped_bytes);
		lines++;
	}
	if (d->bad_records) {
		fprintf(out, "%s%llu record(s) could not be decoded and were skipped\n", prefix,
			(unsigned long long)d->bad_records);
		lines++;
	}
	for (size_t i = 0; i < r->nstreams; i++) {
		const struct reader_stream *s = &r->streams[i];
		if (!s->ended && s->pid && r->alive && r->alive(s->pid)) {
			fprintf(out, "%sprocess %u is still running: it outlived the command that started it (a daemon, "
				"or a child nobody waited for); its profile up to now is included, and it goes on "
				"writing to the file until it exits\n",
				prefix, s->pid);
			lines++;
		} else if (!s->ended && s->pid) {
			fprintf(out, "%sprocess %u stopped without finishing its profile (killed, or still running): read up to its last whole chunk\n",
				prefix, s->pid);
			lines++;
		}
		if (s->seq_gaps) {
			fprintf(out, "%sprocess %u: %u chunk(s) missing from its stream\n", prefix, s->pid,
				s->seq_gaps);
			lines++;
		}
	}
	if (d->nunknown) {
		char buf[256];
		size_t o = 0;
		for (uint32_t i = 0; i < d->nunknown && o < sizeof(buf) - 32; i++)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%llu (%llu)", i ? ", " : "",
					      (unsigned long long)d->unknown[i].type,
					      (unsigned long long)d->unknown[i].count);
		fprintf(out, "%sskipped records of types this strata does not know: %s; the file is format %u.%u, this strata reads %d.%d: upgrade strata to see them\n",
			prefix, buf, d->major, d->minor, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
		lines++;
	}
	return lines;
}
