/* Thread-local first-error record; see include/txc/status.h. */
#include "txc/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_msg[1024];
static _Thread_local txc_status last_status = TXC_OK;

const char *txc_last_error(void) { return last_msg; }
txc_status txc_last_status(void) { return last_status; }

void txc_clear_error(void)
{
    last_msg[0] = '\0';
    last_status = TXC_OK;
}

/* (formatted aside first: an argument may be txc_last_error() itself, as in
 * txc_error_replace(s, "context: %s", txc_last_error())) */
static txc_status record(txc_status status, const char *fmt, va_list ap)
{
    char msg[sizeof last_msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(last_msg, msg, sizeof msg);
    last_status = status;
    return status;
}

txc_status txc_error(txc_status status, const char *fmt, ...)
{
    if (last_status != TXC_OK)
        return status;
    va_list ap;
    va_start(ap, fmt);
    record(status, fmt, ap);
    va_end(ap);
    return status;
}

txc_status txc_error_replace(txc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(status, fmt, ap);
    va_end(ap);
    return status;
}

const char *txc_status_name(txc_status status)
{
    switch (status) {
    case TXC_OK: return "TXC_OK";
    case TXC_ERR_INVALID: return "TXC_ERR_INVALID";
    case TXC_ERR_IO: return "TXC_ERR_IO";
    case TXC_ERR_FORMAT: return "TXC_ERR_FORMAT";
    case TXC_ERR_UNSUPPORTED: return "TXC_ERR_UNSUPPORTED";
    case TXC_ERR_NOMEM: return "TXC_ERR_NOMEM";
    case TXC_ERR_ENV: return "TXC_ERR_ENV";
    case TXC_ERR_CAPACITY: return "TXC_ERR_CAPACITY";
    case TXC_ERR_INTERNAL: return "TXC_ERR_INTERNAL";
    }
    return "TXC_ERR_?";
}
