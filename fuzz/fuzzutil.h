/* fuzz/fuzzutil.h — helpers shared by the libFuzzer targets (see README.md). */
#ifndef TXC_FUZZ_UTIL_H
#define TXC_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The separator of a multi-part input (an index and its shards, a template
 * and its messages): parts are the bytes between separators. */
#define FZ_SEP "\n=====\n"

/* Split data at FZ_SEP into at most max parts (pointers into data); returns
 * the number of parts (>= 1). */
int fz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len, int max);

/* A memfd holding `size` bytes of data, opened by path: writes its
 * "/proc/self/fd/N" into path (cap bytes) and returns the fd (close it
 * after use), or -1 (the run aborts: the harness is broken, not the input). */
int fz_memfd(const uint8_t *data, size_t size, char *path, size_t cap);

/* A fresh private folder for this process (created once, under $TMPDIR or
 * /tmp, removed at exit), and a file `name` in it holding data. */
const char *fz_tmpdir(void);
void fz_write(const char *dir, const char *name, const void *data, size_t size);
void fz_write_file(const char *path, const void *data, size_t size);
/* Remove every file in dir (not recursive). */
void fz_clear_dir(const char *dir);

/* $TXC_SHARED_DIR, else "../shared" beside the source folder the target was
 * built from (TXC_FUZZ_SOURCE_DIR), for targets that read real test data. */
const char *fz_shared_dir(void);

/* Abort with a message: a broken harness (not a finding about the input). */
void fz_die(const char *what);

/* Checks an opened checkpoint as txc/safetensors.h promises (shapes,
 * nbytes, lookup by name) and reads every byte of every tensor; aborts on a
 * broken promise. */
struct txc_safetensors;
void fz_check_safetensors(const struct txc_safetensors *st);

/* decode(ids, skip_special_tokens) and the streaming detokenizer over the
 * same ids: both succeed or both fail, and the stream's pieces concatenate
 * to decode()'s text (txc/tokenizer.h); aborts otherwise. Returns decode()'s
 * text (malloc'd, *len bytes) or NULL when the ids were rejected. */
struct txc_tokenizer;
char *fz_check_decode(const struct txc_tokenizer *t, const int32_t *ids, size_t n, int skip_special, size_t *len);

#endif
