/*
 * snapshot.c — see snapshot.h.
 *
 * Works a chunk at a time with pread, so a large source costs one chunk of
 * memory. Only the first chunk of each stream is decompressed, to learn
 * whether the stream is a process's (it begins with REC_PROCESS) or the
 * CLI's session stream, which needs no end.
 */
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "fdio.h"

struct snap_stream {
	uint64_t id;
	uint32_t next_seq;
	int ended, is_proc;
};

struct snap {
	struct snap_stream *s;
	size_t n, cap;
};

static struct snap_stream *snap_stream(struct snap *sn, uint64_t id)
{
	for (size_t i = 0; i < sn->n; i++)
		if (sn->s[i].id == id)
			return &sn->s[i];
	if (sn->n == sn->cap) {
		size_t cap = sn->cap ? sn->cap * 2 : 16;
		struct snap_stream *ns = realloc(sn->s, cap * sizeof(*ns));
		if (!ns)
			return NULL;
		sn->s = ns;
		sn->cap = cap;
	}
	struct snap_stream *s = &sn->s[sn->n++];
	memset(s, 0, sizeof(*s));
	s->id = id;
	return s;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* The next offset at or after `from` holding a valid chunk header, or
 * `len` if there is none. */
static uint64_t resync(int in, uint64_t from, uint64_t len)
{
	uint8_t buf[65536];
	while (from + STRATA_CHUNK_HDR_SIZE <= len) {
		size_t want = len - from < sizeof(buf) ? (size_t)(len - from) : sizeof(buf);
		if (read_at(in, buf, want, from))
			return len;
		for (size_t i = 0; i + 4 <= want; i++) {
			if (le32_at(buf + i) != STRATA_CHUNK_MAGIC)
				continue;
			uint8_t hb[STRATA_CHUNK_HDR_SIZE];
			struct chunk_header h;
			if (from + i + sizeof(hb) <= len && read_at(in, hb, sizeof(hb), from + i) == 0 &&
			    chunk_header_parse(hb, &h) == FMT_OK)
				return from + i;
		}
		/* The last 3 bytes may begin a magic: look at them again. */
		from += want > 3 ? want - 3 : want;
	}
	return len;
}

int64_t snapshot_copy(int in, uint64_t len, int out, uint64_t end_mono_ns, char *err, size_t errlen)
{
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	struct file_header fh;
	if (len < sizeof(hdr) || read_at(in, hdr, sizeof(hdr), 0) ||
	    file_header_parse(hdr, sizeof(hdr), &fh) != FMT_OK) {
		snprintf(err, errlen, "the profile has no readable file header");
		return -1;
	}
	struct snap sn = { 0 };
	struct wbuf raw, recs, chunk;
	wbuf_init(&raw);
	wbuf_init(&recs);
	wbuf_init(&chunk);
	uint8_t *stored = NULL;
	int64_t written = -1;
	int64_t total = 0;
	errno = 0;

	/* The header is copied as it is, however long a newer minor made it. */
	uint8_t *h0 = malloc(fh.header_size);
	if (!h0 || read_at(in, h0, fh.header_size, 0) || fd_write_all(out, h0, fh.header_size)) {
		free(h0);
		goto io;
	}
	free(h0);
	total += fh.header_size;

	uint64_t off = fh.header_size;
	while (off + STRATA_CHUNK_HDR_SIZE <= len) {
		uint8_t hb[STRATA_CHUNK_HDR_SIZE];
		struct chunk_header h;
		if (read_at(in, hb, sizeof(hb), off))
			goto io;
		if (chunk_header_parse(hb, &h) != FMT_OK) {
			off = resync(in, off + 1, len);
			continue;
		}
		if (off + sizeof(hb) + h.stored_size > len) {
			/* Incomplete: still being written, or cut short; a
			 * later whole chunk (another writer's) may follow. */
			off = resync(in, off + 1, len);
			continue;
		}
		free(stored);
		stored = malloc(h.stored_size ? h.stored_size : 1);
		if (!stored)
			goto oom;
		if (read_at(in, stored, h.stored_size, off + sizeof(hb)))
			goto io;
		int ok;
		int first = 0;
		if (h.seq == 0) {
			ok = chunk_open(&h, stored, &raw) == FMT_OK;
			if (ok) {
				struct rbuf payload, body;
				uint64_t type;
				rbuf_init(&payload, raw.data, raw.len);
				first = rec_next(&payload, &type, &body) == 1 && type == REC_PROCESS;
			}
		} else {
			ok = crc32c(0, stored, h.stored_size) == h.payload_crc;
		}
		if (!ok) {
			off = resync(in, off + 1, len);
			continue;
		}
		struct snap_stream *s = snap_stream(&sn, h.stream);
		if (!s)
			goto oom;
		if (first)
			s->is_proc = 1;
		if (h.seq + 1 > s->next_seq)
			s->next_seq = h.seq + 1;
		if (h.flags & CHUNK_LAST)
			s->ended = 1;
		if (fd_write_all(out, hb, sizeof(hb)) || fd_write_all(out, stored, h.stored_size))
			goto io;
		total += (int64_t)(sizeof(hb) + h.stored_size);
		off += sizeof(hb) + h.stored_size;
	}

	for (size_t i = 0; i < sn.n; i++) {
		struct snap_stream *s = &sn.s[i];
		if (!s->is_proc || s->ended)
			continue;
		struct rec_process_end e = { .end_mono_ns = end_mono_ns, .reason = END_DETACH };
		wbuf_reset(&recs);
		wbuf_reset(&chunk);
		rec_put_process_end(&recs, &e);
		if (recs.oom || chunk_seal(&chunk, recs.data, recs.len, s->id, s->next_seq, CHUNK_LAST, 3))
			goto oom;
		if (fd_write_all(out, chunk.data, chunk.len))
			goto io;
		total += (int64_t)chunk.len;
	}
	written = total;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
	goto done;
io:
	snprintf(err, errlen, "%s", errno ? strerror(errno) : "read or write failed");
done:
	free(stored);
	free(sn.s);
	wbuf_free(&raw);
	wbuf_free(&recs);
	wbuf_free(&chunk);
	return written;
}
