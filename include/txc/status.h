/*
 * txc/status.h — status codes and the last-error message.
 *
 * Every fallible txc call returns a txc_status (0 = TXC_OK) or, for calls
 * that return a pointer, NULL; the reason is then readable with
 * txc_last_error(). No call aborts the process on bad input.
 *
 * The message is thread-local and holds the FIRST error since the last
 * txc_clear_error(): ops that receive a NULL tensor (the result of an
 * earlier failed op) return NULL without overwriting it, so straight-line
 * model code can check once at the end and still report the root cause.
 */
#ifndef TXC_STATUS_H
#define TXC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum txc_status {
    TXC_OK = 0,
    TXC_ERR_INVALID = 1,     /* bad argument: shape, dtype, value out of range */
    TXC_ERR_IO = 2,          /* file missing, unreadable, mmap failed */
    TXC_ERR_FORMAT = 3,      /* file present but corrupt / truncated / malformed */
    TXC_ERR_UNSUPPORTED = 4, /* a valid input txc does not handle (yet) */
    TXC_ERR_NOMEM = 5,       /* allocation failed */
    TXC_ERR_ENV = 6,         /* tensor used outside its environment */
    TXC_ERR_CAPACITY = 7,    /* a fixed capacity is exceeded (e.g. prompt > max_cache_len) */
    TXC_ERR_INTERNAL = 8,    /* a bug in txc */
} txc_status;

/* The message of the first error recorded on this thread since the last
 * txc_clear_error(), or "" when there is none. Never NULL. */
const char *txc_last_error(void);

/* The status of that first error (TXC_OK when there is none). */
txc_status txc_last_status(void);

/* Forget the recorded error (start of a new top-level operation). */
void txc_clear_error(void);

/* Record an error (printf-style message) unless one is already recorded,
 * and return `status`, so that `return txc_error(TXC_ERR_IO, "...")` works.
 * Use txc_error_replace() to overwrite an earlier message (its arguments may
 * include txc_last_error() itself, to wrap it in context). */
txc_status txc_error(txc_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
txc_status txc_error_replace(txc_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Name of a status code ("TXC_ERR_IO"...). */
const char *txc_status_name(txc_status status);

#ifdef __cplusplus
}
#endif
#endif
