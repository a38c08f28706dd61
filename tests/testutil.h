/* Helpers shared by the cmocka tests. */
#ifndef TXC_TESTUTIL_H
#define TXC_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* $TXC_SHARED_DIR (set by ctest) or "../shared": the read-only test data. */
const char *tu_shared_dir(void);
/* $TXC_SOURCE_DIR (set by ctest) or ".": the repository root. */
const char *tu_source_dir(void);
/* snprintf into a static rotating buffer: tu_path("%s/models/x", dir). */
const char *tu_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Read a whole file (NUL-terminated, malloc'd); NULL if missing. */
char *tu_read_file(const char *path, size_t *len);
/* Write bytes to a new file under a fresh temporary directory; returns the
 * directory (static buffer per call index). */
char *tu_mkdtemp(void);
int tu_write_file(const char *path, const void *data, size_t len);
/* Remove a directory tree made by tu_mkdtemp. */
void tu_rm_rf(const char *dir);

#endif
