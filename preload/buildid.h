/* The GNU build-id in a run of ELF notes (the bytes of a PT_NOTE segment), for the PL_REC_MODULE record: reports/
 * matches it against the file it symbolises offline. Pure: reads only [notes, notes + n), at any alignment, no
 * allocation, async-signal-safe. Linked alone by its unit test and fuzz target. */
#pragma once

#include <stddef.h>

/* The first NT_GNU_BUILD_ID note named "GNU" with at most 64 bytes of id: lowercase hex into hex[129], returns 1.
 * Returns 0 (hex untouched) when there is none; a note whose sizes run past the end stops the walk. */
int pl_buildid_from_notes(const void *notes, size_t n, char hex[129]);
