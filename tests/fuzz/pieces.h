/*
 * pieces.h — the .strata file a target that reads profiles (fuzz_reader,
 * fuzz_pprof) makes of its input. Inputs come in two shapes:
 *  - a file as it is (anything not starting with 0x01): exercises the
 *    header, chunk framing, checksums, decompression and resync;
 *  - 0x01 then pieces [stream u8][flags u8][len u16 LE][payload], each
 *    sealed here into an uncompressed chunk with a correct checksum: the
 *    fuzzer's mutations then reach the record decoders and the model
 *    instead of dying at the CRC. tests/fuzz/mkcorpus.c writes seeds of
 *    both shapes.
 */
#ifndef STRATA_FUZZ_PIECES_H
#define STRATA_FUZZ_PIECES_H

#include <stdint.h>

#include "common/format.h"

/* The file for input d[0..n) into `file` (reset first). */
static inline void pieces_file(struct wbuf *file, const uint8_t *d, size_t n)
{
	wbuf_reset(file);
	if (!n || d[0] != 0x01) {
		wbuf_put(file, d, n);
		return;
	}
	d++;
	n--;
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	struct file_header fh = { .major = STRATA_FMT_MAJOR, .minor = STRATA_FMT_MINOR };
	file_header_pack(hdr, &fh);
	wbuf_put(file, hdr, sizeof(hdr));
	uint32_t seq[256] = { 0 };
	size_t i = 0;
	while (i + 4 <= n) {
		uint8_t stream = d[i], flags = d[i + 1];
		size_t len = (size_t)d[i + 2] | (size_t)d[i + 3] << 8;
		i += 4;
		if (len > n - i)
			len = n - i;
		struct chunk_header h = { .stream = 1000u + stream, .seq = seq[stream]++, .codec = CODEC_NONE,
					  .flags = flags & CHUNK_LAST, .raw_size = (uint32_t)len,
					  .stored_size = (uint32_t)len, .payload_crc = crc32c(0, d + i, len) };
		uint8_t ch[STRATA_CHUNK_HDR_SIZE];
		chunk_header_pack(ch, &h);
		wbuf_put(file, ch, sizeof(ch));
		wbuf_put(file, d + i, len);
		i += len;
	}
}

#endif
