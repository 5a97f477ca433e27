# Sourced by the CLI tests with their arguments (path/to/sparsetrain [path/to/mpirun]):
# sets `bin` and `mpirun`, moves into a scratch folder removed at exit (the logs go
# there), and defines `fail` and `expect`, the check that a command is refused in one line.

bin=$(realpath "$1")
mpirun=${2:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect NAME MESSAGE CMD...: a non-zero exit and one line, holding MESSAGE.
expect() {
  local name=$1 msg=$2
  shift 2
  "$@" >"$name.log" 2>&1 && fail "$name: exit code 0: $(tail -n 2 "$name.log")"
  grep -qF -- "$msg" "$name.log" || fail "$name: no line with '$msg': $(cat "$name.log")"
  [[ $(grep -c . "$name.log") -eq 1 ]] || fail "$name: more than one line: $(cat "$name.log")"
}
