#!/usr/bin/env bash
# Prints README's "supported models" table from the architecture tests that
# pass: tests/test_arch.c prints "ARCH-OK|fixture|model_type|features" for
# each fixture whose logits (1e-4 relative) and 16 greedy tokens match
# transformers, through the model's forward eager and compiled (txc_jit, a
# StaticCache, the prefill padded as txc_generate pads it), and
# "ARCH-GENERATE-DECLINES|fixture|why" when txc_generate itself declined the
# sequence (its own length limits), else txc_generate matched too.
# Usage: scripts/supported_models.sh [build-dir] (default build/).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
bin="$dir/test_arch"
if [ ! -x "$bin" ]; then
  echo "no $bin: build first (cmake -S . -B $dir && cmake --build $dir)" >&2
  exit 1
fi
out=$(TXC_SOURCE_DIR="$PWD" "$bin" 2>&1)
rows=$(grep '^ARCH-OK|' <<<"$out" | sort -t'|' -k3,3 -k2,2)
if [ -z "$rows" ]; then
  echo "no architecture test passed" >&2
  exit 1
fi
echo "| model_type | checked against transformers (fixture) | eager | compiled | \`txc generate\` |"
echo "| --- | --- | --- | --- | --- |"
while IFS='|' read -r _ fixture type features; do
  why=$(grep "^ARCH-GENERATE-DECLINES|$fixture|" <<<"$out" | head -1 | cut -d'|' -f3)
  gen=yes
  [ -n "$why" ] && gen="declines: ${why#generate: }"
  echo "| \`$type\` | $features (\`$fixture\`) | yes | yes | $gen |"
done <<<"$rows"
failed=$(grep -E '^\[  FAILED  \] test_' <<<"$out" | sed 's/.*\] //' | sort -u | tr '\n' ' ')
if [ -n "$failed" ]; then
  echo
  echo "failing (left out of the table): $failed"
fi
