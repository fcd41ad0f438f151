/* The event model's byte encoding: trace header, chunk header and record codecs (docs/trace-format.md).
 * One field walker per record type serves both directions, so the writer and the reader cannot drift.
 * Pure functions, thread-safe, no allocation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <plateau/trace.h>

#define PL_TRACE_MAGIC "PLATEAU\0"
#define PL_TRACE_HEADER_BYTES 64u
#define PL_CHUNK_MAGIC 0x4b434c50u /* "PLCK" little endian */
#define PL_CHUNK_HEADER_BYTES 24u
#define PL_REC_HEADER_BYTES 12u    /* u16 type, u16 total length, i64 t_ns */
#define PL_REC_MAX_BYTES 65535u
#define PL_STR_MAX_BYTES 4095u     /* longer strings are truncated by the encoder */

/* Encode rec into buf. Returns the record's length, or 0 if it does not fit in cap (or in 64 KiB). */
size_t pl_event_encode(const pl_trace_record_t *rec, uint8_t *buf, size_t cap);

/* Decode the record at buf (len bytes available). On success returns 0 and sets *used; strings in *rec point
 * into buf. Returns 1 for a well-framed record of an unknown type (skip *used bytes), -EBADMSG if malformed. */
int pl_event_decode(const uint8_t *buf, size_t len, pl_trace_record_t *rec, size_t *used);

void pl_event_header_encode(const pl_trace_header_t *h, uint8_t out[PL_TRACE_HEADER_BYTES]);
/* Returns 0, -EBADMSG (not a trace / bad checksum) or -EPROTONOSUPPORT (newer version). */
int pl_event_header_decode(const uint8_t in[PL_TRACE_HEADER_BYTES], pl_trace_header_t *out);

/* Chunk header for a payload: magic, payload length, record count, sequence number, CRC-32C of the first
 * 16 header bytes and the payload, 4 reserved zero bytes. */
void pl_event_chunk_header(uint8_t out[PL_CHUNK_HEADER_BYTES], const uint8_t *payload, uint32_t len,
                           uint32_t n_records, uint32_t seq);
