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
