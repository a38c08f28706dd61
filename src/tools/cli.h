/* tools/cli.h — what the txc subcommands share: the default model, one-line
 * errors, number parsing, a clock. */
#ifndef TXC_TOOLS_CLI_H
#define TXC_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>

#define EXIT_ERROR 2
#define DEFAULT_MODEL_REL "../shared/models/stories260K"

/* Milliseconds on the monotonic clock. */
double txc_cli_now_ms(void);
/* --model's default: $TXC_MODEL, else ../shared/models/stories260K from the
 * current directory (the repository root in the README's commands), else
 * NULL. */
const char *txc_cli_default_model(void);
/* One line on stderr — "txc: <the library's message>", or "txc: <what>
 * failed" when none was recorded — and EXIT_ERROR. */
int txc_cli_fail(const char *what);
/* The same with a context before the message ("txc: jit-static: ..."). */
int txc_cli_fail_in(const char *context);
/* Parse a whole decimal integer >= min for `flag`; false (and one line on
 * stderr) otherwise. */
bool txc_cli_parse_int(const char *flag, const char *s, int64_t min, int64_t *out);

#endif
