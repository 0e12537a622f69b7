/*
 * reader.h — reads a .strata file chunk by chunk and hands out records.
 *
 * The reader never trusts the file: a bad header is an error with a one-line
 * message, a damaged chunk is skipped (the reader resynchronises on the next
 * valid chunk header), a chunk cut short at the end is reported as a
 * truncated file, and streams that never wrote their last chunk are named.
 * It is incremental: reader_poll() consumes whatever has been appended
 * since the last call, so the live view tails a file that is still growing.
 */
#ifndef STRATA_READER_H
#define STRATA_READER_H

#include <stdint.h>
#include <stdio.h>

#include "common/format.h"

struct reader_stream {
	uint64_t id;
	uint32_t pid;        /* from the stream's REC_PROCESS / REC_SESSION (0 until seen) */
	uint32_t chunks;
	uint32_t next_seq;
	uint32_t seq_gaps;   /* chunks missing from the middle of the stream */
	int ended;           /* saw the CHUNK_LAST chunk */
};

struct reader_diag {
	uint16_t major, minor;     /* file's format version */
	uint64_t file_size;        /* bytes consumed so far */
	uint64_t chunks;           /* good chunks */
	uint64_t corrupt_chunks;   /* damaged chunks skipped */
	uint64_t skipped_bytes;    /* bytes skipped while resynchronising */
	int truncated;             /* the file ends inside a chunk */
	uint64_t truncated_at;     /* offset of the incomplete chunk */
	uint64_t bad_records;      /* records whose body did not decode */
	/* record types this reader does not know (a newer writer): counts per type */
	uint32_t nunknown;
	struct { uint64_t type, count; } unknown[16];
};

/* Called once per record, in file order. `stream` is the chunk's stream.
 * Return non-zero to stop reading (reader_poll returns that value). */
typedef int (*reader_record_fn)(void *ctx, struct reader_stream *stream, uint64_t type,
				struct rbuf *body);

struct reader;

/* Opens `path` and checks its file header. On failure returns NULL and
 * writes a one-line reason (without the path) into err. */
struct reader *reader_open(const char *path, char *err, size_t errlen);
/* Same over an already-open descriptor (not closed by the reader). */
struct reader *reader_open_fd(int fd, char *err, size_t errlen);
void reader_close(struct reader *r);

/* Reads everything appended since the last call and delivers whole chunks.
 * With `final` set, an incomplete tail chunk is reported as truncation;
 * without it (live tailing) it is kept for the next call. Returns 0, the
 * callback's non-zero value, or -1 on an I/O error (err filled). */
int reader_poll(struct reader *r, int final, reader_record_fn fn, void *ctx, char *err,
		size_t errlen);

const struct reader_diag *reader_diag(const struct reader *r);
/* Streams seen so far (array valid until the next reader_poll). */
const struct reader_stream *reader_streams(const struct reader *r, size_t *n);

/* Writes one warning line per problem found (truncation, damaged chunks,
 * unfinished streams, unknown record types) to `out`, each prefixed with
 * `prefix` (e.g. "strata: warning: "). Returns the number of lines. */
int reader_report_diag(const struct reader *r, FILE *out, const char *prefix);

/* For a reader used while profiled processes may still run (strata record
 * at the end of the command, the live view): alive(pid) tells whether an
 * unfinished stream's process is still running, so diagnostics can say
 * "still running" instead of "stopped without finishing". */
void reader_set_alive_check(struct reader *r, int (*alive)(uint32_t pid));

#endif
