#!/usr/bin/env bash
# End-to-end tests of `txc chat`: user turns piped on stdin, the model's chat
# template, the KV cache kept between turns (--verbose shows what was
# reused), exactly one BOS, and bad input giving one line on stderr and exit
# status 2. stories260K has no chat template: the test builds model folders
# of links to its files plus a template (TinyLlama's tokenizer_config.json
# from the shared tokenizers; a Mistral-Instruct-style chat_template.jinja
# that writes BOS).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

# tl: TinyLlama's chat template (no BOS in it, as in transformers)
model_links "$tmp/tl" config.json generation_config.json model.safetensors tokenizer.json special_tokens_map.json
cp "$SHARED/tokenizers/tinyllama-1.1b-chat-v1.0/tokenizer_config.json" "$tmp/tl/"
# inst: stories260K's tokenizer_config.json (bos_token "<s>", eos_token
# "</s>") and Mistral-7B-Instruct-v0.1's template, which writes the BOS
model_links "$tmp/inst"
mistral_template "$tmp/inst"

turns=$'Once upon a time\nLily and Ben went to the park.\n'
chat() { printf '%s' "$turns" | "$TXC" chat --max-new-tokens 24 --no-compile-cache "$@"; }

# --- two turns piped on stdin ---------------------------------------------------
chat --model "$tmp/tl" --verbose >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/out" ] && ! grep -q '^> ' "$tmp/out" && grep -q '^turn 2: ' "$tmp/err"; then
  ok "two turns piped (no prompts when stdin is not a terminal)"
else
  bad "two turns (rc $rc): $(cat "$tmp/out") $(cat "$tmp/err")"
fi
# turn 2 reuses turn 1: its prompt and all but the last token of its reply
t1=$(sed -n 's/^turn 1: \([0-9]*\) prompt tokens.*(\([0-9]*\) new tokens); stop.*/\1 \2/p' "$tmp/err")
reused=$(sed -n 's/^turn 2: .*, \([0-9]*\) reused from the cache.*/\1/p' "$tmp/err")
read -r p1 n1 <<<"$t1"
if [ -n "$reused" ] && [ -n "$p1" ] && [ "$reused" -gt "$p1" ] && [ "$reused" -le $((p1 + n1 - 1)) ]; then
  ok "--verbose: turn 2 reused $reused tokens from the cache (turn 1: $p1 prompt + $n1 new)"
else
  bad "cache reuse: turn 1 '$t1', turn 2 reused '$reused': $(cat "$tmp/err")"
fi
grep -q "^turn 1: .*, 0 reused from the cache" "$tmp/err" && grep -q "^cache: static (max_cache_len 512)" "$tmp/err" \
  && grep -q "^jit: 2 prefill + 1 decode plans for the chat" "$tmp/err" \
  && ok "--verbose: first turn from scratch, one decode plan" || bad "--verbose: $(cat "$tmp/err")"

# The same replies eager, with a DynamicCache, and re-running every step.
for mode in "--no-jit" "--cache dynamic" "--cache none" "--cache dynamic --no-jit"; do
  # shellcheck disable=SC2086
  chat --model "$tmp/tl" $mode >"$tmp/o2" 2>"$tmp/e2" && cmp -s "$tmp/out" "$tmp/o2" \
    && ok "chat $mode: the same replies" || bad "chat $mode: $(cat "$tmp/o2") $(cat "$tmp/e2")"
done

# The replies of transformers' chat (scripts/gen_chat_fixtures.py: the same
# templates and turns, greedy, generate over each turn's rendered prompt).
FIX=${TXC_SOURCE_DIR:?set by ctest}/tests/fixtures
for jit in --jit --no-jit; do
  printf 'Once upon a time\nLily and Ben went to the park.\nThe dog said\n' \
    | "$TXC" chat --model "$tmp/tl" --max-new-tokens 24 --no-compile-cache $jit >"$tmp/ref" 2>&1 \
    && cmp -s "$tmp/ref" "$FIX/chat_stories260k_tinyllama.txt" && ok "TinyLlama template: transformers' replies ($jit)" \
    || bad "TinyLlama template vs transformers ($jit): $(diff "$tmp/ref" "$FIX/chat_stories260k_tinyllama.txt")"
  printf 'Once upon a time\nLily and Ben\nThe end\n' \
    | "$TXC" chat --model "$tmp/inst" --max-new-tokens 24 --no-compile-cache $jit >"$tmp/ref" 2>&1 \
    && cmp -s "$tmp/ref" "$FIX/chat_stories260k_mistral.txt" && ok "Mistral template: transformers' replies ($jit)" \
    || bad "Mistral template vs transformers ($jit): $(diff "$tmp/ref" "$FIX/chat_stories260k_mistral.txt")"
done

# --- exactly one BOS: the template writes it, the tokenizer adds none ----------
printf 'Once upon a time\nLily and Ben\nThe end\n' \
  | "$TXC" chat --model "$tmp/inst" --max-new-tokens 20 --verbose --no-compile-cache >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^turn [123]: [0-9]* prompt tokens (1 BOS), ' "$tmp/err")" -eq 3 ]; then
  ok "one BOS in every turn's prompt"
else
  bad "BOS (rc $rc): $(cat "$tmp/err")"
fi
grep -q "^turn 1: [0-9]* prompt tokens (0 BOS)" <(chat --model "$tmp/tl" --verbose 2>&1 >/dev/null) \
  && ok "TinyLlama's template writes no BOS: none added" || bad "TinyLlama BOS"
# The first turn alone is the prompt `generate` would see: the same reply
# as txc generate over the rendered text (its BOS added by the tokenizer).
echo "Once upon a time" | "$TXC" chat --model "$tmp/inst" --max-new-tokens 20 --no-compile-cache >"$tmp/c1" 2>&1
"$TXC" generate --model "$MODEL" --prompt "[INST] Once upon a time [/INST]" --max-new-tokens 20 \
  --no-compile-cache >"$tmp/g1" 2>&1
cmp -s "$tmp/c1" "$tmp/g1" && ok "turn 1 = generate over the rendered prompt" \
  || bad "turn 1 vs generate: '$(cat "$tmp/c1")' vs '$(cat "$tmp/g1")'"

# Empty lines are no turns; CRLF line ends; no input: no output.
printf '\r\nOnce upon a time\r\n\n' | "$TXC" chat --model "$tmp/inst" --max-new-tokens 20 --no-compile-cache \
  >"$tmp/c2" 2>&1 && cmp -s "$tmp/c1" "$tmp/c2" && ok "empty lines skipped, CRLF" || bad "CRLF: $(cat "$tmp/c2")"
"$TXC" chat --model "$tmp/inst" </dev/null >"$tmp/c3" 2>&1 && [ ! -s "$tmp/c3" ] && ok "no input: no output" \
  || bad "no input: $(cat "$tmp/c3")"
# On a terminal each turn is asked for with "> " (script(1) gives the
# command a pseudo-terminal; skipped where util-linux's script is missing).
if command -v script >/dev/null 2>&1; then
  printf 'Once upon a time\n' | script -qec "'$TXC' chat --model '$tmp/tl' --max-new-tokens 10 --no-compile-cache" \
    /dev/null >"$tmp/tty" 2>&1
  tr -d '\r' <"$tmp/tty" | grep -q '^> .' && ok "\"> \" before each turn on a terminal" \
    || bad "terminal prompt: $(cat -A "$tmp/tty")"
fi
# --message ROLE:TEXT: earlier messages; a last user message is answered
# first, as the same turn read from stdin. (The fixture's first reply is
# its first line, the second its lines 2-3.)
"$TXC" chat --model "$tmp/inst" --max-new-tokens 20 --no-compile-cache --message "user:Once upon a time" \
  </dev/null >"$tmp/m1" 2>&1 && cmp -s "$tmp/c1" "$tmp/m1" && ok "--message user:TEXT answered like a stdin turn" \
  || bad "--message user: $(cat "$tmp/m1") vs $(cat "$tmp/c1")"
printf 'Lily and Ben\n' | "$TXC" chat --model "$tmp/inst" --max-new-tokens 24 --no-compile-cache --verbose \
  --message "user:Once upon a time" --message "assistant:$(head -n1 "$FIX/chat_stories260k_mistral.txt")" \
  >"$tmp/m2" 2>"$tmp/m2e" && [ "$(cat "$tmp/m2")" = "$(sed -n 2,3p "$FIX/chat_stories260k_mistral.txt")" ] \
  && grep -q "^turn 1: .*, 0 reused" "$tmp/m2e" && ok "--message user/assistant then stdin: transformers' second reply" \
  || bad "--message history: $(cat "$tmp/m2") $(cat "$tmp/m2e")"
# Sampling: the same seed, the same chat.
chat --model "$tmp/tl" --do-sample --seed 7 >"$tmp/s1" 2>&1 && chat --model "$tmp/tl" --do-sample --seed 7 --no-jit \
  >"$tmp/s2" 2>&1 && cmp -s "$tmp/s1" "$tmp/s2" && ok "--do-sample --seed: reproducible, eager = compiled" \
  || bad "sampled chat: $(cat "$tmp/s1") / $(cat "$tmp/s2")"

# --- bad input: one line on stderr, exit status 2 ------------------------------
expect_error "model without a chat template" "has no chat_template" "$TXC" chat --model "$MODEL"
expect_error "--max-cache-len too small for the first turn: the prompt is too long" \
  "the prompt is too long: the first turn renders to .* tokens, with a reply more than max_cache_len 20; shorten it or pass a larger --max-cache-len" \
  chat --model "$tmp/tl" --max-cache-len 20
long=$(printf 'a %.0s' $(seq 600))
for mode in static dynamic none; do
  expect_error "a first turn longer than max_position_embeddings (--cache $mode): the prompt is too long" \
    "the prompt is too long: the first turn renders to .* tokens, with a reply more than max_position_embeddings 512; shorten it$" \
    sh -c 'printf "%s\n" "$1" | "$2" chat --model "$3" --no-compile-cache --cache "$4"' _ "$long" "$TXC" "$tmp/tl" "$mode"
done
expect_error "--max-new-tokens near INT64_MAX: a range error" "--max-new-tokens 9223372036854775807 is out of range" \
  "$TXC" chat --model "$tmp/tl" --max-new-tokens 9223372036854775807
printf 'Hi\n' | "$TXC" chat --model "$tmp/tl" --no-compile-cache --max-new-tokens 2 --cache dynamic --max-cache-len 64 \
  >/dev/null 2>"$tmp/ign"
grep -q "^txc: warning: --max-cache-len is ignored with --cache dynamic" "$tmp/ign" \
  && ok "--max-cache-len with --cache dynamic: says it is ignored" || bad "--max-cache-len ignored: $(cat "$tmp/ign")"
printf 'Hi\n' | "$TXC" chat --model "$tmp/tl" --no-compile-cache --max-new-tokens 2 --max-cache-len 900 --verbose \
  >/dev/null 2>"$tmp/clamp"
grep -q "^txc: note: --max-cache-len 900 is more than max_position_embeddings 512: the cache holds 512 tokens" \
  "$tmp/clamp" && grep -q "^cache: static (max_cache_len 512)" "$tmp/clamp" \
  && ok "--max-cache-len above max_position_embeddings: says it is cut" || bad "clamp note: $(cat "$tmp/clamp")"
expect_error "--max-cache-len too small for the second turn" "exceeds max_cache_len 60" \
  chat --model "$tmp/tl" --max-cache-len 60
grep -q . "$tmp/o" && ok "the first turn's reply was printed before the error" || bad "no first reply"
expect_error "the template refuses (raise_exception)" "Conversation roles must alternate" \
  chat --model "$tmp/inst" --system "Be brief."
expect_error "--message without a role" "ROLE:TEXT" "$TXC" chat --model "$tmp/tl" --message "Hello"
expect_error "--threads above TXC_MAX_THREADS" "--threads expects an integer from 1 to 256 (TXC_MAX_THREADS), got '300'" \
  "$TXC" chat --model "$tmp/tl" --threads 300
expect_error "missing folder" "does not exist" "$TXC" chat --model "$tmp/no-such-model"
expect_error "bad --max-new-tokens" "max-new-tokens" "$TXC" chat --model "$tmp/tl" --max-new-tokens 0
expect_error "bad --cache" "none, dynamic or static" "$TXC" chat --model "$tmp/tl" --cache paged
expect_error "bad --temperature" "temperature" "$TXC" chat --model "$tmp/tl" --temperature -1
expect_error "stray argument" "stdin" "$TXC" chat --model "$tmp/tl" "Hello"
expect_error "unknown option" "--frobnicate" "$TXC" chat --model "$tmp/tl" --frobnicate
printf 'Hi\n\xff\xfe\nStill here?\n' >"$tmp/bad-utf8"
# A read error on stdin is an error, not the end of the chat.
expect_error "stdin closed" "stdin is closed" sh -c 'exec "$@" <&-' _ "$TXC" chat --model "$tmp/tl"
expect_error "stdin a directory" "stdin is a directory" sh -c 'exec "$@" <"$0"' "$tmp" "$TXC" chat --model "$tmp/tl"
expect_error "invalid UTF-8 on stdin: names the line" "input line 2 is not UTF-8" \
  sh -c '"$0" chat --model "$1" --max-new-tokens 2 <"$2"' "$TXC" "$tmp/tl" "$tmp/bad-utf8"
printf 'Hi\0there\n' >"$tmp/nul"
expect_error "a NUL byte in a line" "input line 1 is not UTF-8" \
  sh -c '"$0" chat --model "$1" --max-new-tokens 2 <"$2"' "$TXC" "$tmp/tl" "$tmp/nul"
expect_error "--system not UTF-8" "--system is not UTF-8" "$TXC" chat --model "$tmp/tl" --system "$(printf '\xff')"
"$TXC" chat --help | grep -q "^usage: txc chat" && ok "--help" || bad "--help"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
