#!/usr/bin/env bash
# End-to-end tests of `txc tokenize` as a user runs it: encode to "id<TAB>piece"
# lines or --ids, --no-special-tokens, --decode [--keep-special], --bench FILE
# [--repeat N] [--json], a folder holding only tokenizer.json, stdin, and every
# bad input giving one line on stderr and exit status 2.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
TOK=$SHARED/tokenizers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error
cli_quiet_errors=1

# expect_out NAME WANT COMMAND...: stdout must be WANT (printf %b escapes), exit 0
expect_out() {
  local name=$1 want
  want=$(printf '%b' "$2")
  shift 2
  local got rc
  got=$("$@" 2>"$tmp/err")
  rc=$?
  if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ ! -s "$tmp/err" ]; then
    ok "$name"
  else
    bad "$name: rc $rc, got '$got', want '$want', stderr: $(cat "$tmp/err")"
  fi
}

# --- encoding -------------------------------------------------------------------
expect_out "gpt2: id<TAB>piece lines, pieces as in the vocab" '15496\tHello\n995\t\xc4\xa0world' \
  "$TXC" tokenize --model "$TOK/gpt2" "Hello world"
expect_out "gpt2: --ids" '15496 995' "$TXC" tokenize --model "$TOK/gpt2" --ids "Hello world"
expect_out "tinyllama: BOS from the post-processor" '1\t<s>\n15043\t\xe2\x96\x81Hello\n3186\t\xe2\x96\x81world' \
  "$TXC" tokenize --model "$TOK/tinyllama-1.1b-chat-v1.0" "Hello world"
expect_out "tinyllama: --ids" '1 15043 3186' "$TXC" tokenize --model "$TOK/tinyllama-1.1b-chat-v1.0" --ids "Hello world"
expect_out "tinyllama: --no-special-tokens" '15043 3186' \
  "$TXC" tokenize --ids --no-special-tokens --model "$TOK/tinyllama-1.1b-chat-v1.0" "Hello world"
expect_out "qwen3: special tokens in the text" '151644 872 198 13048 90316 151645' \
  "$TXC" tokenize --model "$TOK/qwen3" --ids "$(printf '<|im_start|>user\nHi \xf0\x9f\x98\x80<|im_end|>')"
expect_out "gemma3: control characters and backslashes escaped" \
  '2\t<bos>\n236746\ta\n107\t\\n\n255968\t\\t\n236763\tb\n236785\t\\\\\n236755\tc' \
  "$TXC" tokenize --model "$TOK/gemma3" "$(printf 'a\n\tb\\c')"
expect_out "text from stdin" '15496 995' sh -c "printf 'Hello world' | \"$TXC\" tokenize --model \"$TOK/gpt2\" --ids -"
expect_out "a text that looks like a number" '1238 1731' "$TXC" tokenize --model "$TOK/gpt2" --ids 2024
expect_out "a text that starts with '-' after --" '12 31373' "$TXC" tokenize --model "$TOK/gpt2" --ids -- "-hello"
expect_out "empty text with BOS" '1' "$TXC" tokenize --model "$TOK/tinyllama-1.1b-chat-v1.0" --ids ""

# A folder with tokenizer.json only (no weights), and the file itself.
mkdir "$tmp/only"
cp "$TOK/gpt2/tokenizer.json" "$tmp/only/"
expect_out "folder holding only tokenizer.json" '15496 995' "$TXC" tokenize --model "$tmp/only" --ids "Hello world"
expect_out "--model=FILE" '15496 995' "$TXC" tokenize --model="$tmp/only/tokenizer.json" --ids "Hello world"
expect_out "TXC_MODEL" '15496 995' env TXC_MODEL="$tmp/only" "$TXC" tokenize --ids "Hello world"

# --- decoding -------------------------------------------------------------------
expect_out "--decode" 'Hello world' "$TXC" tokenize --model "$TOK/gpt2" --decode 15496 995
expect_out "--decode skips special tokens" 'Hello' "$TXC" tokenize --model "$TOK/gpt2" --decode 50256 15496
expect_out "--decode --keep-special" '<|endoftext|>Hello' \
  "$TXC" tokenize --model "$TOK/gpt2" --decode --keep-special 50256 15496
expect_out "--decode of one quoted list" 'Hi \xf0\x9f\x98\x80' \
  "$TXC" tokenize --model "$TOK/qwen3" --decode "151644 13048 90316 151645"
text=$(printf 'Caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87, \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 and  spaces\tand tabs')
for m in gpt2 llama3 deepseek_v3 gptoss mistral-7b-v0.1; do
  ids=$("$TXC" tokenize --model "$TOK/$m" --ids "$text")
  # shellcheck disable=SC2086
  back=$("$TXC" tokenize --model "$TOK/$m" --decode $ids)
  if [ "$back" = "$text" ]; then ok "$m: --ids then --decode gives the text back"
  else bad "$m: round trip: '$back'"; fi
done

# --- --bench ----------------------------------------------------------------------
printf 'Hello world\n' >"$tmp/bench.txt"
"$TXC" tokenize --model "$TOK/gpt2" --no-special-tokens --bench "$tmp/bench.txt" --repeat 3 >"$tmp/b" 2>"$tmp/e"
if [ $? -eq 0 ] && grep -q '^tokens: 3 (ids fnv1a64 ' "$tmp/b" && grep -q '^speed: .* MB/s, .* tokens/s$' "$tmp/b" &&
  grep -q '^encode: median .* of 3 runs' "$tmp/b" && [ ! -s "$tmp/e" ]; then ok "--bench prints speed and the token count"
else bad "--bench: $(cat "$tmp/b" "$tmp/e")"; fi
"$TXC" tokenize --model "$TOK/tinyllama-1.1b-chat-v1.0" --bench - --json <"$tmp/bench.txt" >"$tmp/b" 2>"$tmp/e"
if [ $? -eq 0 ] && grep -q '"tokens":4,' "$tmp/b" && grep -q '"add_special_tokens":true' "$tmp/b" && grep -q '"median_cpu_ms":' "$tmp/b" &&
  grep -q '"runs_ms":\[[^],]*,[^],]*,[^],]*,[^],]*,[^],]*\]' "$tmp/b"; then ok "--bench - --json (stdin, BOS counted, 5 runs)"
else bad "--bench --json: $(cat "$tmp/b" "$tmp/e")"; fi

# --- bad input: one line on stderr, exit status 2 -------------------------------
expect_error "missing folder" "does not exist" "$TXC" tokenize --model "$tmp/no-such" "x"
mkdir "$tmp/empty"
expect_error "folder without tokenizer.json" "tokenizer.json" "$TXC" tokenize --model "$tmp/empty" "x"
sed 's/"type": *"BPE"/"type": "WordPiece"/' "$TOK/gpt2/tokenizer.json" >"$tmp/only/tokenizer.json"
expect_error "unsupported model" "model type WordPiece not supported" "$TXC" tokenize --model "$tmp/only" "x"
sed -z 's/"pre_tokenizer": *{[[:space:]]*"type": *"ByteLevel"/"pre_tokenizer": {"type": "BertPreTokenizer"/' \
  "$TOK/gpt2/tokenizer.json" >"$tmp/only/tokenizer.json"
expect_error "unsupported pre-tokenizer" "pre_tokenizer BertPreTokenizer not supported" \
  "$TXC" tokenize --model "$tmp/only" "x"
printf '{"model": ' >"$tmp/only/tokenizer.json"
expect_error "corrupt tokenizer.json" "not valid JSON" "$TXC" tokenize --model "$tmp/only" "x"
expect_error "id out of range" "txc: tokenizer: id 50257 at position 1 is out of range" "$TXC" tokenize --model "$TOK/gpt2" --decode 15496 50257
expect_error "--decode ''" "--decode: no ids given" "$TXC" tokenize --model "$TOK/gpt2" --decode ''
expect_error "--decode ', ,'" "--decode: no ids given" "$TXC" tokenize --model "$TOK/gpt2" --decode ', ,'
# ids 0 and 2 only: 1 is a hole, 3 is out of range
mkdir "$tmp/holes"
printf '{"model":{"type":"BPE","vocab":{"a":0,"b":2},"merges":[]}}' >"$tmp/holes/tokenizer.json"
expect_error "--decode a hole in the vocab" "--decode: id 1 is a hole in the vocabulary: no token has it (ids go up to 2)" \
  "$TXC" tokenize --model "$tmp/holes" --decode 0 1
expect_error "--decode past the vocab" "id 3 at position 0 is out of range" "$TXC" tokenize --model "$tmp/holes" --decode 3
expect_error "negative id" "out of range" "$TXC" tokenize --model "$TOK/gpt2" --decode -1
expect_error "id that is not a number" "bad id 'abc'" "$TXC" tokenize --model "$TOK/gpt2" --decode 1 abc
expect_error "--decode without ids" "needs at least one ID" "$TXC" tokenize --model "$TOK/gpt2" --decode
expect_error "--decode, no id after the options" "needs at least one ID" "$TXC" tokenize --model "$TOK/gpt2" --decode --keep-special
expect_error "--bench of a missing file" "cannot open" "$TXC" tokenize --model "$TOK/gpt2" --bench "$tmp/no-such"
expect_error "--bench of a folder" "cannot read" "$TXC" tokenize --model "$TOK/gpt2" --bench "$tmp"
expect_error "--bench without a file" "needs a value" "$TXC" tokenize --model "$TOK/gpt2" --bench
expect_error "--bench and a TEXT" "takes no TEXT" "$TXC" tokenize --model "$TOK/gpt2" --bench "$tmp/bench.txt" hello
expect_error "--bench --decode" "takes no --decode" "$TXC" tokenize --model "$TOK/gpt2" --bench "$tmp/bench.txt" --decode
expect_error "--repeat 0" "integer >= 1" "$TXC" tokenize --model "$TOK/gpt2" --bench "$tmp/bench.txt" --repeat 0
expect_error "--repeat too large" "at most 100000" "$TXC" tokenize --model "$TOK/gpt2" --bench "$tmp/bench.txt" --repeat 1000000
expect_error "--repeat without --bench" "goes with --bench" "$TXC" tokenize --model "$TOK/gpt2" --repeat 3 hello
expect_error "--bench of invalid UTF-8" "not valid UTF-8" sh -c "printf 'a\\377' | \"$TXC\" tokenize --model \"$TOK/gpt2\" --bench -"
expect_error "no text" "one TEXT argument" "$TXC" tokenize --model "$TOK/gpt2"
expect_error "two texts" "one TEXT argument" "$TXC" tokenize --model "$TOK/gpt2" a b
expect_error "unknown option" "--frobnicate" "$TXC" tokenize --model "$TOK/gpt2" --frobnicate x
expect_error "--model without a value" "needs a value" "$TXC" tokenize --model
expect_error "invalid UTF-8" "tokenizer: the text is not valid UTF-8" "$TXC" tokenize --model "$TOK/gpt2" "$(printf 'a\xff')"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
