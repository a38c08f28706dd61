#!/usr/bin/env bash
# End-to-end tests of generation_config.json's length fields: max_length 0
# is a length, not "absent" (it gave 256 new tokens while max_length 1 or 2
# gave one: the rule is max_length minus the prompt, at least one).
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error

mkdir "$tmp/m"
for f in config.json model.safetensors tokenizer.json; do
  ln -s "$MODEL/$f" "$tmp/m/$f"
done
for ml in 0 1 2; do
  echo "{\"max_length\": $ml}" >"$tmp/m/generation_config.json"
  "$TXC" generate --model "$tmp/m" --prompt "Once" --verbose --no-compile-cache >"$tmp/o" 2>"$tmp/e"
  if grep -q "^decode: no decode step (the one new token came from the prefill)$" "$tmp/e"; then
    ok "max_length $ml with a 2-token prompt: one new token"
  else
    bad "max_length $ml with a 2-token prompt: $(grep '^decode' "$tmp/e")"
  fi
done
echo '{"max_length": 5}' >"$tmp/m/generation_config.json"
"$TXC" generate --model "$tmp/m" --prompt "Once" --verbose --no-compile-cache >"$tmp/o" 2>"$tmp/e"
if grep -q "^decode: .*(2 tokens in" "$tmp/e"; then
  ok "max_length 5 with a 2-token prompt: three new tokens"
else
  bad "max_length 5 with a 2-token prompt: $(grep '^decode' "$tmp/e")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
