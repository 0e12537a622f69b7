/*
 * synth.h — building .strata files in memory with the real encoders, for
 * tests whose answer is known by construction (and for the large-profile
 * generator). Records are appended to a pending chunk of one stream;
 * synth_chunk() seals it onto the file.
 *
 *	struct synth s;
 *	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
 *	rec_put_process(&s.recs, &proc);  ...
 *	synth_chunk(&s, stream_id, CHUNK_LAST);
 *	synth_write(&s, path);   (or use s.file.data / s.file.len)
 */
#ifndef STRATA_SYNTH_H
#define STRATA_SYNTH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/format.h"

#define SYNTH_MAX_STREAMS 64

struct synth {
	struct wbuf file;   /* header + sealed chunks */
	struct wbuf recs;   /* records of the next chunk */
	uint64_t ids[SYNTH_MAX_STREAMS];
	uint32_t seqs[SYNTH_MAX_STREAMS];
	int nids;
	int level;          /* zstd level; 0 = store uncompressed is not an option: chunk_seal decides */
};

static inline void synth_init(struct synth *s, uint16_t major, uint16_t minor)
{
	memset(s, 0, sizeof(*s));
	wbuf_init(&s->file);
	wbuf_init(&s->recs);
	s->level = 1;
	struct file_header h = { .major = major, .minor = minor, .header_size = STRATA_FILE_HDR_SIZE,
				 .created_ns = 1 };
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	file_header_pack(hdr, &h);
	wbuf_put(&s->file, hdr, sizeof(hdr));
}

/* Seals the pending records as the next chunk of `stream`. */
static inline int synth_chunk(struct synth *s, uint64_t stream, uint16_t flags)
{
	int i;
	for (i = 0; i < s->nids && s->ids[i] != stream; i++)
		;
	if (i == s->nids) {
		if (s->nids == SYNTH_MAX_STREAMS)
			return -1;
		s->ids[s->nids++] = stream;
	}
	int rc = chunk_seal(&s->file, s->recs.data, s->recs.len, stream, s->seqs[i]++, flags, s->level);
	wbuf_reset(&s->recs);
	return rc;
}

static inline void synth_free(struct synth *s)
{
	wbuf_free(&s->file);
	wbuf_free(&s->recs);
}

/* Writes bytes to a new temporary file; path receives its name (the caller
 * unlinks it). Returns 0 or -1. */
static inline int write_temp(const void *data, size_t len, char path[64])
{
	snprintf(path, 64, "/tmp/strata-test-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n <= 0) {
			close(fd);
			unlink(path);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
	return 0;
}

static inline int synth_write(struct synth *s, char path[64])
{
	return write_temp(s->file.data, s->file.len, path);
}

#endif
