#!/usr/bin/env bash
# The parts of bench/compare_llamacpp.sh that need neither PyPI nor llama.cpp:
# its option errors, and bench/make_model.py's Hugging Face folder holding
# txc's synthetic weights bit for bit (the same greedy tokens as
# `txc bench --synthetic` for several seeds, float32 and bfloat16), and
# llama.cpp's q/k row permutation. Skipped (77) without Python's numpy.
set -u
export PYTHONDONTWRITEBYTECODE=1
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
SRC=${TXC_SOURCE_DIR:?set by ctest}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

# --- the script's options (checked before anything is installed or built) -----
bash "$SRC/bench/compare_llamacpp.sh" --help >"$tmp/help" 2>&1 && grep -q -- "--pairs N" "$tmp/help" \
  && ok "--help" || bad "--help: $(cat "$tmp/help")"
bash "$SRC/bench/compare_llamacpp.sh" --bogus >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "unknown option '--bogus'" "$tmp/err" \
  && ok "unknown option: exit 2, one line" || bad "unknown option: rc $rc $(cat "$tmp/err")"
bash "$SRC/bench/compare_llamacpp.sh" --pairs >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--pairs needs a value" "$tmp/err" && ok "missing value: exit 2" \
  || bad "missing value: rc $rc $(cat "$tmp/err")"

# A python3 with numpy: the one on PATH, else Debian's (python3-numpy from
# scripts/install-deps.sh).
if ! python3 -c 'import numpy' 2>/dev/null && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  python3() { /usr/bin/python3 "$@"; }
fi
if ! python3 -c 'import numpy' 2>/dev/null; then
  echo "# skipped the rest: python3 has no numpy"
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ] && exit 77 || exit 1
fi
MM="$SRC/bench/make_model.py"

# --- the weights: txc's synthetic generator, reproduced ------------------------
ids() { python3 -c 'import json,sys; print(json.load(sys.stdin)["reference_ids"])'; }
for dt in f32 bf16; do
  for seed in 0 1 5; do
    out=$tmp/m-$dt-$seed
    if ! python3 "$MM" stories260k "$out" --dtype $dt --seed $seed --hf-only --shared "$SHARED" 2>"$tmp/err"; then
      bad "make_model stories260k $dt seed $seed: $(cat "$tmp/err")"
      continue
    fi
    a=$("$TXC" bench --synthetic stories260k --dtype $dt --seed $seed --new-tokens 6 --modes eager-static --json \
        --no-compile-cache | ids)
    b=$("$TXC" bench --model "$out/hf" --dtype $dt --seed $seed --prompt-tokens 8 --new-tokens 6 --modes eager-static \
        --json --no-compile-cache | ids)
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "$dt seed $seed: the folder's tokens are --synthetic's ($a)" \
      || bad "$dt seed $seed: synthetic $a, folder $b"
  done
done
[ -f "$tmp/m-f32-0/hf/tokenizer.json" ] && [ -f "$tmp/m-f32-0/hf/tokenizer_config.json" ] && [ ! -e "$tmp/m-f32-0/model.gguf" ] \
  && ok "hf folder with the tokenizer, no GGUF with --hf-only" || bad "files: $(ls -R "$tmp/m-f32-0")"
# a second call with the same arguments leaves the files alone
before=$(stat -c %Y "$tmp/m-f32-0/hf/model.safetensors")
sleep 1
python3 "$MM" stories260k "$tmp/m-f32-0" --dtype f32 --seed 0 --hf-only --shared "$SHARED" \
  && [ "$(stat -c %Y "$tmp/m-f32-0/hf/model.safetensors")" = "$before" ] && ok "cached: not rewritten" \
  || bad "cached: rewritten"

# --- bad input: one line, exit 2 ------------------------------------------------
python3 "$MM" nosuch "$tmp/x" --shared "$SHARED" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "unknown model 'nosuch'" "$tmp/err" \
  && ok "unknown model: exit 2, one line" || bad "unknown model: rc $rc $(cat "$tmp/err")"
python3 "$MM" stories260k "$tmp/x" --dtype f16 --shared "$SHARED" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "dtype expects bf16 or f32" "$tmp/err" && ok "bad dtype: exit 2" || bad "bad dtype: rc $rc $(cat "$tmp/err")"
python3 "$MM" stories260k "$tmp/x" --shared "$tmp/nowhere" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "no tokenizer.json" "$tmp/err" \
  && ok "no shared data: exit 2, one line" || bad "no shared data: rc $rc $(cat "$tmp/err")"

# --- llama.cpp's q/k permutation (convert_hf_to_gguf LlamaModel.permute) ---------
# Per head the rows [first half | second half] become interleaved pairs: head of 4 rows
# [0 1 2 3] -> [0 2 1 3]; two heads of 4 -> [0 2 1 3 4 6 5 7].
got=$(cd "$SRC/bench" && python3 -c 'import numpy as np, make_model as m
print(m.llama_permute(np.arange(4)[:, None], 1).ravel().tolist(), m.llama_permute(np.arange(8)[:, None], 2).ravel().tolist())')
[ "$got" = "[0, 2, 1, 3] [0, 2, 1, 3, 4, 6, 5, 7]" ] && ok "q/k permutation" || bad "q/k permutation: $got"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
