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

#endif
