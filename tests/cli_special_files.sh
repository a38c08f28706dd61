#!/usr/bin/env bash
# End-to-end tests: a FIFO (or another non-regular file) where a model
# folder's small file should be is one line and exit 2, never a wait for a
# writer that never comes: config.json, generation_config.json,
# tokenizer.json, tokenizer_config.json, chat_template.jinja, and
# `txc tokenize --model FIFO` (a file is read as a tokenizer.json); and a
# text over 1 GiB for `tokenize -` or `tokenize --bench FILE` (a sparse
# file here) is refused from its size, not read until memory runs out.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

# a folder with stories260K's files, one of them ($1) replaced by a FIFO
fifo_folder() {
  local g
  rm -rf "$tmp/m" && mkdir "$tmp/m"
  for g in config.json generation_config.json model.safetensors tokenizer.json; do
    [ "$g" = "$1" ] || ln -s "$MODEL/$g" "$tmp/m/$g"
  done
  mkfifo "$tmp/m/$1"
}
# (timeout: before the fix each of these waited forever)
for f in config.json generation_config.json tokenizer.json; do
  fifo_folder "$f"
  expect_error "generate: a FIFO as $f" "$f: not a regular file" \
    timeout 20 "$TXC" generate --model "$tmp/m" --prompt hi --max-new-tokens 2
done
for f in tokenizer_config.json chat_template.jinja; do
  fifo_folder "$f"
  expect_error "chat: a FIFO as $f" "$f: not a regular file" \
    timeout 20 sh -c "echo hi | '$TXC' chat --model '$tmp/m' --max-new-tokens 2"
done
mkfifo "$tmp/fifo"
expect_error "tokenize --model FIFO" "not a regular file" timeout 20 "$TXC" tokenize --model "$tmp/fifo" hi

truncate -s 2G "$tmp/sparse"
expect_error "tokenize --bench: a 2 GiB file" "larger than 1024 MiB" \
  "$TXC" tokenize --model "$MODEL" --bench "$tmp/sparse"
expect_error "tokenize -: 2 GiB on stdin" "longer than 1024 MiB" \
  sh -c "'$TXC' tokenize --model '$MODEL' - <'$tmp/sparse'"
rm -f "$tmp/sparse"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
