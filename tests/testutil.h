/* Helpers shared by the cmocka tests. */
#ifndef TXC_TESTUTIL_H
#define TXC_TESTUTIL_H

#include <pthread.h>
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
/* One line of /proc/self/status ("VmRSS:", "VmHWM:") in kB; -1 where absent. */
long tu_status_kb(const char *key);
/* A small llama folder for the loader's memory tests: config.json and
 * model.safetensors (2-D weights in F32, or BF16 when bf16; deterministic
 * values in about +-0.06, norms 1.0): hidden h, intermediate inter, layers,
 * vocab, heads / kv_heads; k and v have kv_heads * h / heads rows. Returns
 * the weights' bytes; *rowwise (if not NULL) the o/down bytes of all layers
 * and *big the largest of them. Fails the test on an I/O error. */
size_t tu_write_llama_folder(const char *dir, int64_t h, int64_t inter, int layers, int64_t vocab, int heads,
                             int kv_heads, int bf16, size_t *rowwise, size_t *big);
/* Remove a directory tree made by tu_mkdtemp. */
void tu_rm_rf(const char *dir);
/* The float32 weight bytes one rank of a GPT-2 config holds at tensor
 * parallel size n: 1/n of wte (when vocab_size divides by n), c_attn and its
 * bias, c_fc and its bias, attn.c_proj and mlp.c_proj; all of wpe, the
 * LayerNorms and the two c_proj biases (replicated). */
struct txc_hf_config;
size_t tu_gpt2_tp_param_bytes(const struct txc_hf_config *c, int n);

/* ---- counting the heap ------------------------------------------------------
 * testutil.c wraps malloc, calloc, realloc, free (of non-NULL), aligned_alloc,
 * memalign and posix_memalign over glibc's __libc_* functions and counts the
 * calls (atomically, from any thread). Under AddressSanitizer, which owns
 * malloc, nothing is wrapped: TU_HEAP_COUNTED is 0 and the count stays 0. */
#if defined(__SANITIZE_ADDRESS__)
#define TU_HEAP_COUNTED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_HEAP_COUNTED 0
#endif
#endif
#ifndef TU_HEAP_COUNTED
#define TU_HEAP_COUNTED 1
#endif
long tu_heap_calls(void);

/* ---- op fixtures (JSON written by scripts/gen_*_fixtures.py) ------------ */
#include <cjson/cJSON.h>
#include "txc/env.h"

/* A fixture tensor: {"dtype": "float32"|"float16"|"bfloat16"|"int32"|
 * "int64"|"bool", "shape": [..], "data": [.. row-major ..]}; floats may be
 * the strings "nan", "inf", "-inf". Optional "transpose": [d0, d1] makes the
 * returned tensor a non-contiguous view: the data is stored for the shape
 * with d0/d1 swapped and then transposed (so "shape" is the view's shape).
 * Returns a new tensor (caller releases) in the active env; fails the test
 * on malformed input. */
txc_tensor *tu_tensor_from_json(const cJSON *j);
/* Assert `t` matches the fixture tensor `expected` (dtype, shape, values
 * within |a-b| <= atol + rtol*|b|; NaN matches NaN, inf matches inf; int64
 * exactly, past 2^53 too; -0.0 and 0.0 differ only when `expected` has
 * "signed_zeros": true). `what` names the case in failure messages. */
void tu_assert_tensor_close(const char *what, const txc_tensor *t, const cJSON *expected, double rtol, double atol);
/* Load a JSON file under the repository (tu_source_dir()/rel); fails the
 * test when missing. Integer literals longer than 15 digits keep their text
 * in the number item's valuestring (read exactly by the fixture helpers).
 * Caller frees with cJSON_Delete. */
cJSON *tu_load_json(const char *rel);

/* Device threads (txc_devices_run) cannot call cmocka's asserts: the first
 * failure of any thread is kept in tu_device_failure (written under
 * tu_device_lock, prefixed "device D, line L: ") and the test asserts on
 * it after the run. TU_DEVICE_CHECK returns 1 from the device function. */
extern pthread_mutex_t tu_device_lock;
extern char tu_device_failure[2048];
void tu_device_fail(int line, const char *fmt, ...);
#define TU_DEVICE_CHECK(cond, ...)                                                                                   \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            tu_device_fail(__LINE__, __VA_ARGS__);                                                                   \
            return 1;                                                                                                \
        }                                                                                                            \
    } while (0)

#endif
