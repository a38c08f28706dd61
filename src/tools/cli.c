/* What the txc subcommands share; see tools/cli.h. */
#include "tools/cli.h"
#include "txc/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

double txc_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *txc_cli_default_model(void)
{
    const char *env = getenv("TXC_MODEL");
    if (env && *env)
        return env;
    struct stat st;
    return stat(DEFAULT_MODEL_REL, &st) == 0 && S_ISDIR(st.st_mode) ? DEFAULT_MODEL_REL : NULL;
}

int txc_cli_fail(const char *what)
{
    if (*txc_last_error())
        fprintf(stderr, "txc: %s\n", txc_last_error());
    else
        fprintf(stderr, "txc: %s failed\n", what);
    return EXIT_ERROR;
}

int txc_cli_fail_in(const char *context)
{
    fprintf(stderr, "txc: %s%s%s\n", context, *txc_last_error() ? ": " : " failed", txc_last_error());
    return EXIT_ERROR;
}

bool txc_cli_parse_int(const char *flag, const char *s, int64_t min, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min) {
        fprintf(stderr, "txc: %s expects an integer >= %lld, got '%s'\n", flag, (long long)min, s);
        return false;
    }
    *out = v;
    return true;
}
