/* formats/files.h — reading a model folder's small files and describing their
 * JSON in messages (internal: formats/, and tokenizer/ and chat/ above it). */
#ifndef TXC_FORMATS_FILES_H
#define TXC_FORMATS_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>
#include "txc/status.h"

/* "dir/name" (one '/' between), malloc'd; NULL + TXC_ERR_NOMEM. */
char *txc_hf_path_join(const char *dir, const char *name);

/* Read the whole regular file `path` into a malloc'd, NUL-terminated
 * buffer (*text, *len without the NUL). When `missing` is non-NULL, a file
 * that does not exist sets *missing and returns TXC_OK with *text NULL.
 * A FIFO, device or folder at `path` is refused without blocking (opened
 * with O_NONBLOCK, its type checked before a read).
 * Errors: TXC_ERR_IO ("cannot open PATH: reason", not a regular file, a
 * read error), TXC_ERR_FORMAT (larger than max_bytes), TXC_ERR_NOMEM. */
txc_status txc_hf_read_file(const char *path, size_t max_bytes, char **text, size_t *len, bool *missing);

/* What a JSON value is, for messages: "missing" (NULL), "null", "a boolean",
 * "a number", "a string", "an array", "an object". */
const char *txc_hf_json_kind(const cJSON *v);

/* Hand the free memory inside glibc's heap back to the system
 * (malloc_trim(3): the top of the heap, and MADV_DONTNEED on the free pages
 * inside it), so that a freed cJSON tree of a large file (tokenizer.json) or
 * an earlier benchmark row does not stay in the RSS. Calls from several
 * threads (the devices of `--devices`, each loading a tokenizer) are
 * serialized. Does nothing where glibc does not own malloc: under
 * AddressSanitizer, whose allocator replaces it, glibc's malloc_trim would
 * set up glibc's own unused arenas lazily, and from four threads at once it
 * crashed there (a read of address 0x8 in mtrim); and outside glibc.
 * No errors. */
void txc_hf_trim_heap(void);

#endif
