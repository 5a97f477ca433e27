# Sourced by the CLI tests: `fail` and `expect`, the check that a command is refused in one
# line. The sourcing script runs in its scratch folder (the logs are written there).

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect NAME MESSAGE CMD...: a non-zero exit and one line, holding MESSAGE.
expect() {
  local name=$1 msg=$2
  shift 2
  "$@" >"$name.log" 2>&1 && fail "$name: exit code 0: $(tail -n 2 "$name.log")"
  grep -qF -- "$msg" "$name.log" || fail "$name: no line with '$msg': $(cat "$name.log")"
  [[ $(grep -c . "$name.log") -eq 1 ]] || fail "$name: more than one line: $(cat "$name.log")"
}
