#!/usr/bin/env bash
# End-to-end tests of `txc generate` as a user runs it: real model, streamed
# output, the three cache modes, --verbose, and every bad input giving one
# line on stderr and exit status 2.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }

# --- the main job -----------------------------------------------------------
for cache in static dynamic none; do
  "$TXC" generate --model "$MODEL" --prompt "Lily and Ben" --max-new-tokens 200 --cache "$cache" \
    >"$tmp/out-$cache" 2>"$tmp/err-$cache"
  rc=$?
  if [ $rc -eq 0 ] && head -c 40 "$tmp/out-$cache" | grep -q "^were playing in the park. They liked"; then
    ok "generate --cache $cache"
  else
    bad "generate --cache $cache (rc $rc): $(head -c 200 "$tmp/out-$cache") $(cat "$tmp/err-$cache")"
  fi
done
if cmp -s "$tmp/out-static" "$tmp/out-dynamic" && cmp -s "$tmp/out-static" "$tmp/out-none"; then
  ok "identical text in the three cache modes"
else
  bad "cache modes disagree"
fi
# 200 new tokens, as transformers' reference (the exact text is checked
# token by token in test_model; here the streamed end of it).
if tail -c 70 "$tmp/out-static" | grep -q "They did not want to play with the box. They did not want$"; then
  ok "full reference continuation"
else
  bad "continuation differs from the reference: ...$(tail -c 80 "$tmp/out-static")"
fi

"$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 20 --verbose \
  >"$tmp/out" 2>"$tmp/err"
if grep -q "^load: " "$tmp/err" && grep -q "^prefill: " "$tmp/err" && grep -q "^decode: .* tokens/s" "$tmp/err" \
  && grep -q "^cache: static (max_cache_len 25)" "$tmp/err" && grep -q "^, there was a little girl" "$tmp/out"; then
  ok "--verbose timings"
else
  bad "--verbose: $(cat "$tmp/err")"
fi

"$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 20 --cache static \
  --max-cache-len 64 >"$tmp/out64" 2>&1 && cmp -s "$tmp/out" "$tmp/out64" && ok "--max-cache-len 64" \
  || bad "--max-cache-len 64"

# Default model: ../shared/models/stories260K from the current directory.
mkdir -p "$tmp/repo"
ln -s "$SHARED" "$tmp/shared"
(cd "$tmp/repo" && env -u TXC_MODEL "$TXC" generate --max-new-tokens 5 >"$tmp/def" 2>&1) && ok "default model" \
  || bad "default model: $(cat "$tmp/def")"
TXC_MODEL=$MODEL "$TXC" generate --max-new-tokens 5 -p "The cat" >"$tmp/envm" 2>&1 && ok "TXC_MODEL" \
  || bad "TXC_MODEL: $(cat "$tmp/envm")"

# --- bad input: one line on stderr, exit status 2 ------------------------------
expect_error() { # name, needle, command...
  local name=$1 needle=$2
  shift 2
  "$@" >"$tmp/o" 2>"$tmp/e"
  local rc=$? lines
  lines=$(wc -l <"$tmp/e")
  if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$needle" "$tmp/e"; then
    ok "$name"
  else
    bad "$name: rc $rc, $lines lines: $(cat "$tmp/e")"
  fi
}
copy_model() { rm -rf "$tmp/m"; mkdir "$tmp/m"; cp "$MODEL"/*.json "$MODEL"/model.safetensors "$tmp/m/"; }

(cd "$tmp" && mkdir -p nowhere/deeper && cd nowhere/deeper && \
  expect_error "no model anywhere" "TXC_MODEL" env -u TXC_MODEL "$TXC" generate)
expect_error "missing folder" "does not exist" "$TXC" generate --model "$tmp/no-such-model"
copy_model; rm "$tmp/m/model.safetensors"
expect_error "missing model.safetensors" "model.safetensors" "$TXC" generate --model "$tmp/m"
copy_model; head -c 100000 "$MODEL/model.safetensors" >"$tmp/m/model.safetensors"
expect_error "truncated model.safetensors" "model.safetensors" "$TXC" generate --model "$tmp/m"
copy_model; printf 'garbage, not safetensors at all' >"$tmp/m/model.safetensors"
expect_error "corrupt model.safetensors" "model.safetensors" "$TXC" generate --model "$tmp/m"
copy_model; sed -i 's/"hidden_size": 64/"hidden_size": 128/' "$tmp/m/config.json"
expect_error "shape disagrees with config.json" "hidden_size" "$TXC" generate --model "$tmp/m"
copy_model; sed -i 's/"model_type": "llama"/"model_type": "rwkv"/' "$tmp/m/config.json"
expect_error "unknown model_type" "model_type 'rwkv'" "$TXC" generate --model "$tmp/m"
copy_model; sed -i 's/"type": "BPE"/"type": "WordPiece"/' "$tmp/m/tokenizer.json"
expect_error "unsupported tokenizer model" "WordPiece" "$TXC" generate --model "$tmp/m"
copy_model; rm "$tmp/m/tokenizer.json"
expect_error "missing tokenizer.json" "tokenizer.json" "$TXC" generate --model "$tmp/m"
expect_error "prompt longer than max_cache_len" "max_cache_len 4" \
  "$TXC" generate --model "$MODEL" --prompt "Once upon a time there was" --max-cache-len 4
expect_error "bad --cache" "none, dynamic or static" "$TXC" generate --model "$MODEL" --cache paged
expect_error "bad --max-new-tokens" "max-new-tokens" "$TXC" generate --model "$MODEL" --max-new-tokens zero
expect_error "unknown command" "unknown command" "$TXC" frobnicate
expect_error "unknown option" "--frobnicate" "$TXC" generate --model "$MODEL" --frobnicate
expect_error "missing option value" "max-new-tokens" "$TXC" generate --model "$MODEL" --max-new-tokens
expect_error "stray argument" "unexpected argument" "$TXC" generate --model "$MODEL" "Once upon"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
