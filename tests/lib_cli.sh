# Shared by the end-to-end tests tests/cli_*.sh (sourced, not a test itself):
# pass/fail counting and the bad-input check. Needs $tmp (a scratch folder).
# With cli_quiet_errors=1 an error case must also print nothing on stdout.
pass=0 fail=0
cli_quiet_errors=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }

# expect_error NAME NEEDLE COMMAND...: COMMAND exits 2 with exactly one line
# on stderr, and that line holds NEEDLE.
expect_error() {
  local name=$1 needle=$2
  shift 2
  "$@" >"$tmp/o" 2>"$tmp/e"
  local rc=$? lines
  lines=$(wc -l <"$tmp/e")
  if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$needle" "$tmp/e" &&
    { [ "$cli_quiet_errors" -eq 0 ] || [ ! -s "$tmp/o" ]; }; then
    ok "$name"
  else
    bad "$name: rc $rc, $lines lines: $(cat "$tmp/e")"
  fi
}

# model_links DIR [FILE...]: DIR made a model folder of links to $MODEL's
# files (default config.json generation_config.json model.safetensors
# tokenizer.json tokenizer_config.json), for a test to add a template to.
model_links() {
  local dir=$1 f
  shift
  [ $# -gt 0 ] || set -- config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json
  mkdir -p "$dir"
  for f in "$@"; do ln -s "$MODEL/$f" "$dir/$f"; done
}
# mistral_template DIR: Mistral-7B-Instruct-v0.1's chat template (it writes
# BOS; roles must alternate user/assistant) as DIR/chat_template.jinja.
mistral_template() {
  cat >"$1/chat_template.jinja" <<'TPL'
{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}
TPL
}
