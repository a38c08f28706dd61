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
model_links "$tmp/m"
echo "{{ messages[0].nope.x }}" >"$tmp/m/chat_template.jinja"
expect_error "render error names the template once" \
  "^txc: chat template line 1: 'dict object' has no attribute 'nope'$" sh -c "echo hi | '$TXC' chat --model '$tmp/m'"
echo "{{ raise_exception('Roles must alternate.') }}" >"$tmp/m/chat_template.jinja"
expect_error "raise_exception keeps its context" "^txc: chat template: Roles must alternate.$" \
  sh -c "echo hi | '$TXC' chat --model '$tmp/m'"

# ---- the compile cache ----
gen() { "$TXC" generate --model "$MODEL" --prompt "Once upon" --max-new-tokens 4 --verbose "$@"; }
# under a regular file: plans cannot be written, and no file was rejected
touch "$tmp/afile"
"$TXC" bench --model "$MODEL" --modes jit-static --new-tokens 2 --prompt-tokens 4 --compile-cache "$tmp/afile/c" \
  >/dev/null 2>"$tmp/e"
if grep -q "compiled plan was not saved" "$tmp/e" && ! grep -q "not usable" "$tmp/e"; then
  ok "cache under a regular file: nothing rejected"
else
  bad "cache under a regular file: $(cat "$tmp/e")"
fi
# a compile cache that cannot be written: one warning line with the reason
# (it was silent without --verbose); the run goes on, its plans in memory
"$TXC" generate --model "$MODEL" --prompt "Once upon" --max-new-tokens 4 --greedy --no-compile-cache \
  >"$tmp/want" 2>/dev/null
cache_warning() { # cache_warning NAME REASON DIR: generate and chat with the cache in DIR
  "$TXC" generate --model "$MODEL" --prompt "Once upon" --max-new-tokens 4 --greedy --compile-cache "$3" \
    >"$tmp/o" 2>"$tmp/e"
  local rc=$?
  if [ $rc -eq 0 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && cmp -s "$tmp/o" "$tmp/want" &&
    grep -q "^txc: warning: compile cache: a compiled plan was not saved (.*$2.*); it is used in memory" "$tmp/e"; then
    ok "generate, $1: one warning line, the same text"
  else
    bad "generate, $1: rc $rc: $(cat "$tmp/e")"
  fi
  printf 'Hi\nAgain\n' | "$TXC" chat --model "$tmp/m2" --max-new-tokens 3 --greedy --compile-cache "$3" \
    >"$tmp/o" 2>"$tmp/e"
  rc=$?
  if [ $rc -eq 0 ] && [ "$(grep -c "compile cache" "$tmp/e")" -eq 1 ] && grep -q "was not saved (.*$2" "$tmp/e"; then
    ok "chat, $1: one warning line in two turns"
  else
    bad "chat, $1: rc $rc: $(cat "$tmp/e")"
  fi
}
mkdir "$tmp/m2"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  ln -s "$MODEL/$f" "$tmp/m2/$f"
done
echo "{% for m in messages %}{{ m.role }}: {{ m.content }} {% endfor %}" >"$tmp/m2/chat_template.jinja"
cache_warning "cache under a regular file" "Not a directory" "$tmp/afile/c"
if [ "$(id -u)" -ne 0 ]; then # root writes anyway
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  cache_warning "read-only cache folder" "Permission denied" "$tmp/ro"
  chmod 755 "$tmp/ro"
fi
# a FIFO where a plan file should be: skipped with a note, not a hang
gen --compile-cache "$tmp/cc" >/dev/null 2>&1
plan=$(ls "$tmp/cc"/decode-*.txcplan | head -1)
rm -f "$plan" && mkfifo "$plan"
timeout 60 "$TXC" generate --model "$MODEL" --prompt "Once upon" --max-new-tokens 4 --verbose \
  --compile-cache "$tmp/cc" >/dev/null 2>"$tmp/e"
rc=$?
if [ $rc -eq 0 ] && grep -q "1 files rejected (corrupt, stale or not a regular file)" "$tmp/e" && [ -f "$plan" ] &&
  [ ! -p "$plan" ]; then
  ok "FIFO at a plan's path: skipped, replaced"
else
  bad "FIFO at a plan's path: rc $rc: $(cat "$tmp/e")"
fi
# --compile-cache-max-mb: the least recently used plans go first
mkdir "$tmp/cap"
for i in 1 2 3; do
  head -c 600000 /dev/zero >"$tmp/cap/old$i-00000000000000000000000000000000.txcplan"
  touch -d "$((4 - i)) hours ago" "$tmp/cap/old$i-00000000000000000000000000000000.txcplan"
done
touch -d "5 hours ago" "$tmp/cap/old1-00000000000000000000000000000000.txcplan" # the least recently used
gen --compile-cache "$tmp/cap" --compile-cache-max-mb 1 >/dev/null 2>"$tmp/e"
rc=$?
total=$(cat "$tmp/cap"/*.txcplan | wc -c)
if [ $rc -eq 0 ] && [ ! -e "$tmp/cap/old1-00000000000000000000000000000000.txcplan" ] &&
  [ ! -e "$tmp/cap/old2-00000000000000000000000000000000.txcplan" ] &&
  [ -e "$tmp/cap/old3-00000000000000000000000000000000.txcplan" ] && [ "$total" -le 1048576 ] &&
  ls "$tmp/cap"/decode-*.txcplan >/dev/null 2>&1; then
  ok "--compile-cache-max-mb 1 evicts the least recently used plans ($total bytes left)"
else
  bad "--compile-cache-max-mb 1: rc $rc, $total bytes: $(ls "$tmp/cap")"
fi
expect_error "--compile-cache-max-mb -1" "compile-cache-max-mb expects an integer >= 0" gen --compile-cache-max-mb -1
expect_error "--compile-cache-max-mb too large" "at most" gen --compile-cache-max-mb 99999999999999
expect_error "bench --compile-cache-max-mb x" "compile-cache-max-mb expects" \
  "$TXC" bench --model "$MODEL" --compile-cache-max-mb x
echo "{% for m in messages %}{{ m['content'] }}{% endfor %}" >"$tmp/m/chat_template.jinja"
if printf 'hi\n' | "$TXC" chat --model "$tmp/m" --max-new-tokens 2 --compile-cache "$tmp/cap" \
  --compile-cache-max-mb 0 >/dev/null 2>"$tmp/e"; then
  ok "chat takes --compile-cache-max-mb"
else
  bad "chat --compile-cache-max-mb: $(cat "$tmp/e")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
