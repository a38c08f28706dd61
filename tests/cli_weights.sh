#!/usr/bin/env bash
# End-to-end tests of where the weights live: `--mmap` / `--no-mmap` on
# `txc generate` and `txc bench` (the same text either way, the load line of
# --verbose), `txc bench --weights mmap,copy` (rows under both, the load of
# each, the new JSON fields), and bad flags giving one line on stderr and
# exit status 2. No timing is asserted.
set -u
TXC=${TXC_BIN:?set by ctest}
SHARED=${TXC_SHARED_DIR:?set by ctest}
MODEL=$SHARED/models/stories260K
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib_cli.sh" # pass/fail, ok, bad, expect_error
cli_quiet_errors=1

# --- generate: the same text in both modes, the load line --------------------------
for m in mmap no-mmap; do
  "$TXC" generate --model "$MODEL" --prompt "Lily and Ben" --max-new-tokens 24 --no-compile-cache --verbose \
    --"$m" >"$tmp/out.$m" 2>"$tmp/err.$m"
  [ $? -eq 0 ] && ok "generate --$m (rc 0)" || bad "generate --$m: $(cat "$tmp/err.$m")"
done
cmp -s "$tmp/out.mmap" "$tmp/out.no-mmap" && [ -s "$tmp/out.mmap" ] && ok "--mmap and --no-mmap give the same text" \
  || bad "texts differ: $(cat "$tmp/out.mmap") / $(cat "$tmp/out.no-mmap")"
grep -q "^load: [0-9.]* ms (mmap, 1.0 MB; weights [0-9.]* ms)$" "$tmp/err.mmap" && ok "load line (mmap)" \
  || bad "load line (mmap): $(grep '^load' "$tmp/err.mmap")"
grep -q "^load: [0-9.]* ms (copy, 1.0 MB\(, huge pages\)\?; weights [0-9.]* ms, of which copy [0-9.]* ms)$" \
  "$tmp/err.no-mmap" && ok "load line (copy)" || bad "load line (copy): $(grep '^load' "$tmp/err.no-mmap")"
"$TXC" generate --model "$MODEL" --prompt "Lily and Ben" --max-new-tokens 24 --no-compile-cache --verbose \
  >"$tmp/out.def" 2>"$tmp/err.def"
grep -q "^load: [0-9.]* ms (copy, " "$tmp/err.def" && ok "the copy is the default" \
  || bad "default: $(grep '^load' "$tmp/err.def")"
"$TXC" generate --model "$MODEL" --prompt "Lily" --max-new-tokens 4 --no-compile-cache --verbose --no-mmap \
  --no-hugepages >/dev/null 2>"$tmp/err.nh"
grep -q "^load: [0-9.]* ms (copy, 1.0 MB; weights" "$tmp/err.nh" && ok "--no-hugepages" \
  || bad "--no-hugepages: $(grep '^load' "$tmp/err.nh")"
"$TXC" generate --help | grep -q -- "--mmap, --no-mmap" && ok "generate --help lists --mmap" || bad "generate --help"

# --- bench: both weights modes ----------------------------------------------------
"$TXC" bench --model "$MODEL" --new-tokens 16 --modes jit-static,eager-static --weights mmap,copy \
  --no-compile-cache >"$tmp/table" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && ok "bench --weights mmap,copy (rc 0)" || bad "bench --weights: rc $rc $(cat "$tmp/err")"
grep -q "^weights: mmap, 1.0 MB (1.0 MB in place in the mmap); load [0-9.]* ms, peak RSS [0-9.]* MB$" "$tmp/table" && ok "mmap load line" \
  || bad "mmap load line: $(grep '^weights' "$tmp/table")"
grep -q "^weights: copy, 1.0 MB (1.0 MB copied in [0-9.]* ms, [0-9.]* GB/s, \(huge\|small\) pages); load [0-9.]* ms, peak RSS [0-9.]* MB$" "$tmp/table" \
  && ok "copy load line" || bad "copy load line: $(grep '^weights' "$tmp/table")"
for r in jit-static/mmap eager-static/mmap jit-static/copy eager-static/copy; do
  grep -q "^$r  *16 " "$tmp/table" && ok "row $r" || bad "row $r"
done
grep -q "^tokens: all modes agree (16 new tokens)" "$tmp/table" && ok "tokens agree across weights modes" \
  || bad "tokens: $(grep '^tokens' "$tmp/table")"
grep -q "^compute: peak [0-9.]* GFLOP/s (\(avx512 fp32 fma\|avx2 fp32 fma\|scalar fp32\), " "$tmp/table" && ok "compute peak line" \
  || bad "compute peak: $(grep '^compute' "$tmp/table")"
# stories260K (1 MB) fits any last-level cache: marked, not given a bandwidth fraction
grep -q "^  jit-static/copy .* cache-resident .* ok$" "$tmp/table" && ok "cache-resident, within the RSS bound" \
  || bad "memory row: $(grep '^  jit-static/copy' "$tmp/table")"

"$TXC" bench --model "$MODEL" --new-tokens 8 --modes jit-static --mmap --json --no-compile-cache >"$tmp/j" 2>"$tmp/err"
[ $? -eq 0 ] && ok "bench --mmap --json" || bad "bench --mmap --json: $(cat "$tmp/err")"
for key in '"weights":"mmap"' '"load_ms":' '"prefill_gflops":' '"prefill_peak_fraction":' '"peak_gflops":' \
  '"peak_rss_mb":' '"rss_bound_mb":' '"rss_within_bound":true' '"cache_resident":true' '"above_bandwidth":' '"bytes_per_token":' \
  '"decode_gbps":' '"bw_fraction":' '"membw_gbps":' '"loads":[{"weights":"mmap"'; do
  grep -qF "$key" "$tmp/j" && ok "json $key" || bad "json $key missing: $(cat "$tmp/j")"
done

# --- synthetic models too (their weights are a temporary file) ----------------------
"$TXC" bench --synthetic stories260k --new-tokens 8 --modes jit-static --weights mmap,copy --no-compile-cache \
  >"$tmp/syn" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "^weights: mmap, 1.0 MB" "$tmp/syn" && grep -q "^weights: copy, 1.0 MB" "$tmp/syn" \
  && grep -q "^tokens: all modes agree" "$tmp/syn" && ok "bench --synthetic --weights mmap,copy" \
  || bad "bench --synthetic --weights: $(cat "$tmp/syn" "$tmp/err")"

# --- non-finite weights: --check-tensors, and a --dtype conversion that overflows ------------
# Copies of stories260K with one weight changed: a NaN (nan/), 1e6 (big/: float16's inf).
if command -v python3 >/dev/null && python3 - "$MODEL" "$tmp" <<'PY'
import json, shutil, struct, sys, os
src, tmp = sys.argv[1], sys.argv[2]
b = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])["model.layers.1.mlp.down_proj.weight"]  # float32 (64, 172)
off = 8 + n + t["data_offsets"][0]
for d, val, idx in (("nan", float("nan"), 172 * 3 + 70), ("big", 1e6, 5)):
    os.mkdir(f"{tmp}/{d}")
    bb = bytearray(b)
    bb[off + 4 * idx:off + 4 * idx + 4] = struct.pack("<f", val)
    open(f"{tmp}/{d}/model.safetensors", "wb").write(bb)
    for f in ("config.json", "tokenizer.json", "generation_config.json"):
        shutil.copy(f"{src}/{f}", f"{tmp}/{d}/")
PY
then
  expect_error "--check-tensors: a NaN names the tensor and the index" \
    "tensor 'model.layers.1.mlp.down_proj.weight' has a NaN at index \[3, 70\]" \
    "$TXC" generate --model "$tmp/nan" --check-tensors
  printf '{{ bos_token }}{%% for m in messages %%}{{ m.content }}{%% endfor %%}' >"$tmp/nan/chat_template.jinja"
  expect_error "chat --check-tensors" "has a NaN at index \[3, 70\]" sh -c 'echo Hi | "$@"' _ \
    "$TXC" chat --model "$tmp/nan" --check-tensors
  expect_error "bench --check-tensors" "has a NaN at index \[3, 70\]" "$TXC" bench --model "$tmp/nan" --check-tensors
  "$TXC" generate --model "$tmp/nan" --check-tensors --mmap --max-new-tokens 2 >/dev/null 2>"$tmp/e"
  grep -q "has a NaN at index" "$tmp/e" && ok "--check-tensors with --mmap" || bad "--check-tensors --mmap: $(cat "$tmp/e")"
  "$TXC" generate --model "$tmp/big" --check-tensors --max-new-tokens 2 >/dev/null 2>&1 \
    && ok "--check-tensors: 1e6 is finite in float32" || bad "--check-tensors refused a finite model"
  "$TXC" generate --model "$tmp/big" --dtype f16 --max-new-tokens 2 --no-compile-cache >/dev/null 2>"$tmp/e"
  [ $? -eq 0 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] \
    && grep -q "^txc: warning: --dtype float16: 1 values of tensor 'model.layers.1.mlp.down_proj.weight' overflow to inf" "$tmp/e" \
    && ok "--dtype f16 overflowing to inf: one warning line naming the tensor" || bad "overflow warning: $(cat "$tmp/e")"
  "$TXC" generate --model "$MODEL" --dtype f16 --max-new-tokens 2 --no-compile-cache >/dev/null 2>"$tmp/e"
  [ ! -s "$tmp/e" ] && ok "--dtype f16 without overflow: no warning" || bad "spurious warning: $(cat "$tmp/e")"
  expect_error "--check-tensors --dtype f16: the overflow is an error" \
    "tensor 'model.layers.1.mlp.down_proj.weight': 1 values overflow float16 to inf" \
    "$TXC" generate --model "$tmp/big" --dtype f16 --check-tensors
else
  ok "non-finite weights checks skipped (no python3)"
fi

# --- bad flags ------------------------------------------------------------------------
expect_error "--mmap takes no value" "option '--mmap=1' is unknown or needs a value" \
  "$TXC" generate --model "$MODEL" --mmap=1
expect_error "bench --no-mmap=x" "option '--no-mmap=x' is unknown" "$TXC" bench --model "$MODEL" --no-mmap=x
expect_error "unknown weights mode" "unknown weights mode 'disk' in --weights (known: mmap, copy)" \
  "$TXC" bench --model "$MODEL" --weights mmap,disk
expect_error "weights mode twice" "weights mode 'copy' is listed twice" "$TXC" bench --model "$MODEL" --weights copy,copy
expect_error "empty --weights" "unknown weights mode ''" "$TXC" bench --model "$MODEL" --weights ""
expect_error "--weights with --mmap" "not both" "$TXC" bench --model "$MODEL" --weights copy --mmap
expect_error "--weights needs a value" "option '--weights' is unknown or needs a value" "$TXC" bench --model "$MODEL" --weights

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
