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
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

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

# The prompt from stdin (--prompt -): the text of --prompt "Once upon a time"; --prompt-file (one prompt
# a line, the same reader's checks): its one line's text, newlines written as \n.
printf 'Once upon a time\n' >"$tmp/prompt.txt"
"$TXC" generate --model "$MODEL" --prompt-file "$tmp/prompt.txt" --max-new-tokens 20 >"$tmp/pf" 2>&1 \
  && [ "$(sed 's/\\n/\n/g' "$tmp/pf")" = "$(cat "$tmp/out")" ] && ok "--prompt-file of one line" \
  || bad "--prompt-file: $(cat "$tmp/pf")"
"$TXC" generate --model "$MODEL" --prompt - --max-new-tokens 20 <"$tmp/prompt.txt" >"$tmp/ps" 2>&1 \
  && cmp -s "$tmp/out" "$tmp/ps" && ok "--prompt - reads stdin" || bad "--prompt -: $(cat "$tmp/ps")"
head -c $((64 * 1024 * 1024 + 1)) /dev/zero | tr '\0' a >"$tmp/huge.txt"
expect_error "--prompt-file over 64 MiB" "--prompt-file: $tmp/huge.txt is larger than 64 MiB" \
  "$TXC" generate --model "$MODEL" --prompt-file "$tmp/huge.txt"
rm -f "$tmp/huge.txt"
printf 'Once \xff upon' >"$tmp/bad.txt"
expect_error "--prompt-file not UTF-8" "--prompt-file: $tmp/bad.txt is not UTF-8 text" \
  "$TXC" generate --model "$MODEL" --prompt-file "$tmp/bad.txt"
expect_error "--prompt - with a NUL byte" "--prompt -: stdin is not UTF-8 text" \
  sh -c 'printf "a\000b" | "$@"' _ "$TXC" generate --model "$MODEL" --prompt -
expect_error "--prompt not UTF-8" "--prompt is not UTF-8 text" "$TXC" generate --model "$MODEL" --prompt "$(printf '\xc3')"
expect_error "--prompt-file missing" "--prompt-file: cannot read $tmp/none.txt: No such file" \
  "$TXC" generate --model "$MODEL" --prompt-file "$tmp/none.txt"
expect_error "--prompt-file a directory" "is a directory" "$TXC" generate --model "$MODEL" --prompt-file "$tmp"
expect_error "--prompt - with stdin closed" "--prompt -: cannot read stdin: it is closed" \
  sh -c 'exec "$@" <&-' _ "$TXC" generate --model "$MODEL" --prompt -
expect_error "--prompt and --prompt-file" "not both" \
  "$TXC" generate --model "$MODEL" --prompt hi --prompt-file "$tmp/prompt.txt"

# Default model: ../shared/models/stories260K from the current directory.
mkdir -p "$tmp/repo"
ln -s "$SHARED" "$tmp/shared"
(cd "$tmp/repo" && env -u TXC_MODEL "$TXC" generate --max-new-tokens 5 >"$tmp/def" 2>&1) && ok "default model" \
  || bad "default model: $(cat "$tmp/def")"
TXC_MODEL=$MODEL "$TXC" generate --max-new-tokens 5 -p "The cat" >"$tmp/envm" 2>&1 && ok "TXC_MODEL" \
  || bad "TXC_MODEL: $(cat "$tmp/envm")"

# --- bad input: one line on stderr, exit status 2 ------------------------------
copy_model() { rm -rf "$tmp/m"; mkdir "$tmp/m"; cp "$MODEL"/*.json "$MODEL"/model.safetensors "$tmp/m/"; }

(cd "$tmp" && mkdir -p nowhere/deeper && cd nowhere/deeper && \
  expect_error "no model anywhere" "TXC_MODEL" env -u TXC_MODEL "$TXC" generate)
expect_error "missing folder" "does not exist" "$TXC" generate --model "$tmp/no-such-model"
# --model naming a file: it says so; a *.gguf is read as GGUF (an 8-byte one is truncated); a GGUF file
# by its magic under another name is told to be named .gguf.
expect_error "--model a file" "--model $MODEL/config.json is a file, not a model folder" \
  "$TXC" generate --model "$MODEL/config.json"
printf 'GGUF\3\0\0\0' >"$tmp/model.gguf"
printf 'GGUF\3\0\0\0' >"$tmp/model.bin"
mkdir -p "$tmp/folder.gguf"
expect_error "--model a truncated .gguf file" "$tmp/model.gguf: truncated GGUF" \
  "$TXC" generate --model "$tmp/model.gguf"
expect_error "--model a GGUF file by its magic" "is a GGUF file, but its name does not end in .gguf" \
  "$TXC" generate --model "$tmp/model.bin"
expect_error "--model a folder named .gguf" "is a folder, not a GGUF file" \
  "$TXC" generate --model "$tmp/folder.gguf"
expect_error "chat --model a truncated .gguf file" "truncated GGUF" "$TXC" chat --model "$tmp/model.gguf"
expect_error "bench --model a truncated .gguf file" "truncated GGUF" "$TXC" bench --model "$tmp/model.gguf"
expect_error "bench --model a file" "is a file, not a model folder" "$TXC" bench --model "$MODEL/config.json"
expect_error "tokenize --model a truncated .gguf file" "truncated GGUF" \
  "$TXC" tokenize --model "$tmp/model.gguf" hello
expect_error "tokenize --model a GGUF by its magic" "its name does not end in .gguf" \
  "$TXC" tokenize --model "$tmp/model.bin" hello
expect_error "prompt as long as --max-cache-len" "as many as max_cache_len 5" "$TXC" generate --model "$MODEL" \
  --prompt "Once upon a time" --max-cache-len 5
expect_error "TXC_THREADS not a number" "TXC_THREADS must be an integer from 1 to 256" env TXC_THREADS=abc "$TXC" generate --model "$MODEL"
expect_error "TXC_THREADS zero" "TXC_THREADS must be an integer from 1 to 256" env TXC_THREADS=0 "$TXC" generate --model "$MODEL"
expect_error "TXC_THREADS above 256" "TXC_THREADS must be an integer from 1 to 256" env TXC_THREADS=300 "$TXC" generate --model "$MODEL"
# The stop note advises a larger --max-cache-len only where the cache can grow.
"$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-cache-len 8 --max-new-tokens 20 >/dev/null 2>"$tmp/note8"
grep -q "^txc: note: generation stopped at max_cache_len (8 tokens); raise --max-cache-len$" "$tmp/note8" \
  && ok "stop note: raise --max-cache-len" || bad "stop note at 8: $(cat "$tmp/note8")"
"$TXC" generate --model "$MODEL" --prompt "$(printf 'a %.0s' $(seq 507))" --max-cache-len 600 --max-new-tokens 5 \
  >/dev/null 2>"$tmp/note512"
grep -q "^txc: note: generation stopped at max_cache_len (512 tokens), the model's max_position_embeddings$" \
  "$tmp/note512" && ok "stop note at max_position_embeddings: no advice to raise the cache" \
  || bad "stop note at 512: $(cat "$tmp/note512")"
# A prompt of exactly max_position_embeddings tokens: the same answer in every cache mode.
p512=$(printf 'a %.0s' $(seq 510)) # 512 tokens with the BOS
for cache in static dynamic none; do
  expect_error "prompt of max_position_embeddings tokens (--cache $cache)" \
    "the prompt has 512 tokens, as many as max_position_embeddings 512 (no room for a new token)" \
    "$TXC" generate --model "$MODEL" --prompt "$p512" --cache "$cache" --verbose
done
expect_error "--max-new-tokens near INT64_MAX: a range error naming the flag" \
  "--max-new-tokens 9223372036854775807 is out of range (an integer from 1 to 2147483647)" \
  "$TXC" generate --model "$MODEL" --max-new-tokens 9223372036854775807
expect_error "--max-new-tokens past int64" "--max-new-tokens 99999999999999999999 is out of range" \
  "$TXC" generate --model "$MODEL" --max-new-tokens 99999999999999999999
for cache in dynamic none; do
  "$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 3 --cache $cache --max-cache-len 8 \
    >/dev/null 2>"$tmp/ign"
  [ "$(cat "$tmp/ign")" = "txc: warning: --max-cache-len is ignored with --cache $cache (only the static cache has a set length)" ] \
    && ok "--max-cache-len with --cache $cache: says it is ignored" || bad "--cache $cache --max-cache-len: $(cat "$tmp/ign")"
done
"$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 3 --max-cache-len 600 --verbose \
  >/dev/null 2>"$tmp/clamp"
grep -q "^txc: note: --max-cache-len 600 is more than max_position_embeddings 512: the cache holds 512 tokens$" \
  "$tmp/clamp" && grep -q "^cache: static (max_cache_len 512)" "$tmp/clamp" \
  && ok "--max-cache-len above max_position_embeddings: says it is cut" || bad "clamp note: $(cat "$tmp/clamp")"
expect_error "TXC_SIMD_LEVEL out of range" "TXC_SIMD_LEVEL must be 0" env TXC_SIMD_LEVEL=9 "$TXC" generate --model "$MODEL"
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
# llama weights under another model_type: the first missing tensor is named (not a tensor count)
copy_model; sed -i 's/"model_type": "llama"/"model_type": "qwen2"/' "$tmp/m/config.json"
expect_error "llama weights as qwen2" "tensor 'model.layers.0.self_attn.q_proj.bias' is missing" "$TXC" generate --model "$tmp/m"
copy_model; sed -i 's/"model_type": "llama"/"model_type": "gpt2"/' "$tmp/m/config.json"
expect_error "llama weights as gpt2" "tensor 'transformer.wte.weight' is missing" "$TXC" generate --model "$tmp/m"
copy_model; sed -i 's/"num_hidden_layers": 5/"num_hidden_layers": 100/' "$tmp/m/config.json"
expect_error "more layers than tensors" "num_hidden_layers 100, but model.safetensors has only" "$TXC" generate --model "$tmp/m"
copy_model; sed -i 's/"type": "BPE"/"type": "WordPiece"/' "$tmp/m/tokenizer.json"
expect_error "unsupported tokenizer model" "WordPiece" "$TXC" generate --model "$tmp/m"
# tokenizer.json with more ids than config.json's vocab_size: the message names the added token past it.
copy_model
python3 - "$tmp/m/tokenizer.json" <<'PY' 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
d["added_tokens"].append({"id": 512, "content": "<|extra|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
json.dump(d, open(sys.argv[1], "w"))
PY
if [ $? -eq 0 ]; then
  expect_error "vocab_size mismatch names the added token" \
    "tokenizer.json has ids up to 512, but config.json's vocab_size is 512: the added token '<|extra|>' has id 512" \
    "$TXC" generate --model "$tmp/m"
fi
# The model's first greedy token (id 432, ",") taken out of tokenizer.json: a hole in the vocab, called so.
copy_model
python3 - "$tmp/m/tokenizer.json" <<'PY' 2>/dev/null
import json, sys
d = json.load(open(sys.argv[1]))
v = d["model"]["vocab"]
tok = [k for k, i in v.items() if i == 432][0]
del v[tok]
parts = lambda x: x.split(" ") if isinstance(x, str) else x
d["model"]["merges"] = [x for x in d["model"]["merges"] if tok not in parts(x) and "".join(parts(x)) != tok]
json.dump(d, open(sys.argv[1], "w"))
PY
if [ $? -eq 0 ]; then
  expect_error "a generated id that is a hole in the vocab" "the model chose id 432, a hole in tokenizer.json's vocabulary" \
    "$TXC" generate --model "$tmp/m" --prompt "Once upon a time" --max-new-tokens 3
fi
copy_model; rm "$tmp/m/tokenizer.json"
expect_error "missing tokenizer.json" "tokenizer.json" "$TXC" generate --model "$tmp/m"
expect_error "prompt longer than max_cache_len" "max_cache_len 4" \
  "$TXC" generate --model "$MODEL" --prompt "Once upon a time there was" --max-cache-len 4
expect_error "bad --cache" "none, dynamic or static" "$TXC" generate --model "$MODEL" --cache paged
expect_error "an option where a value belongs" "--cache needs a value" "$TXC" generate --model "$MODEL" --cache --max-new-tokens 3
expect_error "bad --max-new-tokens" "max-new-tokens" "$TXC" generate --model "$MODEL" --max-new-tokens zero
expect_error "--threads above TXC_MAX_THREADS" "--threads expects an integer from 1 to 256 (TXC_MAX_THREADS), got '257'" \
  "$TXC" generate --model "$MODEL" --threads 257
expect_error "--threads 0" "--threads expects an integer from 1 to 256" "$TXC" generate --model "$MODEL" --threads 0
expect_error "unknown command" "unknown command" "$TXC" frobnicate
expect_error "unknown option" "--frobnicate" "$TXC" generate --model "$MODEL" --frobnicate
expect_error "missing option value" "max-new-tokens" "$TXC" generate --model "$MODEL" --max-new-tokens
expect_error "stray argument" "unexpected argument" "$TXC" generate --model "$MODEL" "Once upon"

# --- sampling, repetition penalty, stop strings ---------------------------------
gen() { "$TXC" generate --model "$MODEL" --prompt "Once upon a time" --max-new-tokens 40 "$@" 2>"$tmp/serr"; }
gen --do-sample --seed 1 >"$tmp/s1a" && gen --do-sample --seed 1 >"$tmp/s1b" && [ -s "$tmp/s1a" ] \
  && cmp -s "$tmp/s1a" "$tmp/s1b" && ok "--do-sample --seed 1 twice: the same text" \
  || bad "--do-sample --seed 1 twice: $(cat "$tmp/s1a") / $(cat "$tmp/s1b") $(cat "$tmp/serr")"
gen --do-sample --seed 1 --no-jit >"$tmp/s1e" && cmp -s "$tmp/s1a" "$tmp/s1e" \
  && ok "--seed 1: eager = compiled" || bad "--seed 1 eager: $(cat "$tmp/s1e") vs $(cat "$tmp/s1a")"
gen --do-sample --seed 2 >"$tmp/s2" && ! cmp -s "$tmp/s1a" "$tmp/s2" && ok "--seed 1 vs --seed 2 differ" \
  || bad "--seed 2 gave the text of --seed 1: $(cat "$tmp/s2")"
gen >"$tmp/greedy" && ! cmp -s "$tmp/s1a" "$tmp/greedy" && ok "sampling differs from greedy" \
  || bad "sampling = greedy: $(cat "$tmp/greedy")"
gen --seed 1 --temperature 0.5 >"$tmp/g2" && cmp -s "$tmp/greedy" "$tmp/g2" \
  && ok "--temperature without --do-sample stays greedy (transformers)" || bad "--temperature alone: $(cat "$tmp/g2")"
gen --do-sample --seed 5 --temperature 0.8 --top-k 40 --top-p 0.9 --min-p 0.05 --verbose >"$tmp/mix" \
  && grep -q "^sampling: seed 5, temperature 0.8, top_k 40, top_p 0.9, min_p 0.05" "$tmp/serr" \
  && grep -q "^jit: 1 prefill + 1 decode plans" "$tmp/serr" && ok "sampling flags, one decode plan" \
  || bad "sampling flags: $(cat "$tmp/serr")"
gen --repetition-penalty 1.5 >"$tmp/pen" && ! cmp -s "$tmp/greedy" "$tmp/pen" && ok "--repetition-penalty" \
  || bad "--repetition-penalty changed nothing: $(cat "$tmp/pen")"
gen --max-new-tokens 60 --stop "Lily" --verbose >"$tmp/stop" && [ "$(cat "$tmp/stop")" = ", there was a little girl named " ] \
  && grep -q "^stop: stop string" "$tmp/serr" && ok "--stop: stops and trims" \
  || bad "--stop: '$(cat "$tmp/stop")' $(cat "$tmp/serr")"
gen --max-new-tokens 60 --stop "zzz" --stop "park" --stop "girl" >"$tmp/stop2" \
  && [ "$(cat "$tmp/stop2")" = ", there was a little " ] && ok "--stop repeated: the first one in the text" \
  || bad "--stop repeated: '$(cat "$tmp/stop2")'"
gen --stop "no such text anywhere" >"$tmp/stop3" && cmp -s "$tmp/greedy" "$tmp/stop3" \
  && ok "--stop never met: the whole text" || bad "--stop never met: '$(cat "$tmp/stop3")'"
gen --stop "named Lily. She loved to dance" >"$tmp/stop4" && cmp -s "$tmp/greedy" "$tmp/stop4" \
  && ok "--stop begun but not met: the held text is printed" || bad "--stop begun: '$(cat "$tmp/stop4")'"
gen --stop "named Lily. She" >"$tmp/stop5" && [ "$(cat "$tmp/stop5")" = ", there was a little girl " ] \
  && ok "--stop across tokens" || bad "--stop across tokens: '$(cat "$tmp/stop5")'"
# generation_config.json decides by default; flags override it
copy_model
printf '{"bos_token_id": 1, "eos_token_id": [1, 2], "do_sample": true, "temperature": 0.9, "top_k": 30}\n' \
  >"$tmp/m/generation_config.json"
"$TXC" generate --model "$tmp/m" --prompt "Once upon a time" --max-new-tokens 40 --seed 3 >"$tmp/gc1" 2>&1 \
  && "$TXC" generate --model "$tmp/m" --prompt "Once upon a time" --max-new-tokens 40 --seed 3 >"$tmp/gc2" 2>&1 \
  && cmp -s "$tmp/gc1" "$tmp/gc2" && ! cmp -s "$tmp/gc1" "$tmp/greedy" \
  && ok "generation_config.json do_sample: samples, seeded" || bad "generation_config do_sample: $(cat "$tmp/gc1")"
"$TXC" generate --model "$tmp/m" --prompt "Once upon a time" --max-new-tokens 40 --greedy >"$tmp/gc3" 2>&1 \
  && cmp -s "$tmp/gc3" "$tmp/greedy" && ok "--greedy overrides generation_config.json" \
  || bad "--greedy: $(cat "$tmp/gc3")"
# generation_config.json: max_new_tokens 0 is refused (as transformers); a key txc does not
# implement gets one warning line each, and the run goes on.
copy_model
printf '{"bos_token_id": 1, "eos_token_id": 2, "max_new_tokens": 0}\n' >"$tmp/m/generation_config.json"
expect_error "generation_config.json max_new_tokens 0" "field 'max_new_tokens' is 0, expected > 0" \
  "$TXC" generate --model "$tmp/m" --prompt "Once upon a time"
printf '{"bos_token_id": 1, "eos_token_id": 2, "num_beams": 4, "no_repeat_ngram_size": 3, "num_return_sequences": 1}\n' \
  >"$tmp/m/generation_config.json"
"$TXC" generate --model "$tmp/m" --prompt "Once upon a time" --max-new-tokens 40 >"$tmp/gcw" 2>"$tmp/gcw.err"
if [ $? -eq 0 ] && cmp -s "$tmp/gcw" "$tmp/greedy" && [ "$(wc -l <"$tmp/gcw.err")" -eq 2 ] \
  && grep -q "^txc: warning: generation_config.json: num_beams 4 is not implemented by txc and is ignored$" "$tmp/gcw.err" \
  && grep -q "^txc: warning: generation_config.json: no_repeat_ngram_size 3 is not implemented" "$tmp/gcw.err"; then
  ok "generation_config.json keys txc does not implement: one warning line each"
else
  bad "generation_config.json warnings: $(cat "$tmp/gcw.err")"
fi
expect_error "bad --temperature" "temperature" "$TXC" generate --model "$MODEL" --do-sample --temperature -1
expect_error "zero --temperature" "temperature" "$TXC" generate --model "$MODEL" --do-sample --temperature 0
expect_error "--temperature that overflows float32 logits" "1e-30" "$TXC" generate --model "$MODEL" --do-sample --temperature 1e-50
expect_error "--repetition-penalty that underflows" "1e-30" "$TXC" generate --model "$MODEL" --repetition-penalty 1e-50
expect_error "bad --top-p" "top-p" "$TXC" generate --model "$MODEL" --top-p 1.5
expect_error "bad --top-k" "top-k" "$TXC" generate --model "$MODEL" --top-k -2
expect_error "bad --min-p" "min-p" "$TXC" generate --model "$MODEL" --min-p nan
expect_error "bad --repetition-penalty" "repetition-penalty" "$TXC" generate --model "$MODEL" --repetition-penalty 0
expect_error "bad --seed" "seed" "$TXC" generate --model "$MODEL" --seed -1
expect_error "empty --stop" "stop" "$TXC" generate --model "$MODEL" --stop ""

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
