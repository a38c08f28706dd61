#!/usr/bin/env bash
# A short run of the load test of txc serve (scripts/serve_load_test.sh:
# 200 requests at 16 concurrent clients, a mix of streaming, cancelled and
# malformed ones; every well-formed request gets its text alone; exit 0 at
# SIGTERM, no sanitizer report in the ASan build). The long run (>= 1,000
# requests against build-asan/txc) is by hand: scripts/serve_load_test.sh.
set -u
TXC=${TXC_BIN:?set by ctest}
SRC=${TXC_SOURCE_DIR:?set by ctest}
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
exec "$SRC/scripts/serve_load_test.sh" --txc "$TXC" --requests 200 --clients 16 --parallel 8 --deadline 400
