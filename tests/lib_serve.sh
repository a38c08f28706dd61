# Shared by the txc serve tests tests/cli_serve*.sh (sourced, not a test
# itself; needs $TXC, $tmp and lib_cli.sh's ok/bad). The servers listen on
# 127.0.0.1 on a free port (--port 0), read back from the first line.
pids=()
serve_kill_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
# serve_start NAME ARGS...: `txc serve --port 0 ARGS` in the background,
# stdout/stderr in $tmp/NAME.out/.err; sets PID and PORT once it listens.
serve_start() {
  local name=$1
  shift
  serve_start_with "$name" -- "$@"
}
# serve_start_with NAME LAUNCHER... -- ARGS...: serve_start under a launcher
# (e.g. mpirun -np 2; none: NAME -- ARGS); PID is the launcher's. The
# array SERVE_ARGS, when set, goes before ARGS (a test's common flags).
serve_start_with() {
  local name=$1 launch=()
  shift
  while [ "$1" != "--" ]; do
    launch+=("$1")
    shift
  done
  shift
  ${launch[@]+"${launch[@]}"} "$TXC" serve --port 0 ${SERVE_ARGS[@]+"${SERVE_ARGS[@]}"} "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  PID=$!
  pids+=("$PID")
  PORT=
  for _ in $(seq 1 600); do
    PORT=$(sed -n 's/^txc serve: listening on http:\/\/127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/$name.err")
    [ -n "$PORT" ] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "server $name did not start: $(cat "$tmp/$name.err")"
  return 1
}
# serve_stop_ok NAME: SIGTERM to $PID, then the exit status must be 0 and
# the last line "txc serve: stopped".
serve_stop_ok() {
  kill -TERM "$PID"
  wait "$PID"
  local rc=$?
  [ $rc -eq 0 ] && grep -q '^txc serve: stopped$' "$tmp/$1.err" && ok "$1: SIGTERM: exit 0" \
    || bad "$1: SIGTERM: rc $rc: $(tail -3 "$tmp/$1.err")"
}
