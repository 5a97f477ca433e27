#!/usr/bin/env bash
# What a careless or hostile cluster user can point sparsetrain at, each ending in one
# line (and nothing destroyed):
#  - --trace at a device node, a folder or a symlink; --out at /, '', a file; a symlink
#    among a run's files; pack --out at a file: refused before anything is written;
#  - --resume through a symlink to the checkpoint in --out with --overwrite continues the
#    run instead of deleting it; an --overwrite that would delete the resumed file is refused;
#  - removing <out>/.sparsetrain.lock while a run trains does not let a second run in;
#  - ranks that disagree on --device, --check-flags, the subcommand, --comm or the
#    resumed checkpoint stop on every rank within 30 s with one line naming it;
#  - a bad SPARSETRAIN_EMU_DELAY_US is one line, not an abort on a stream thread;
#  - --sp scope=1 under --hierarchy is read as scope=tensor and refused;
#  - fft's reported density stays in [0, 1];
#  - a checkpoint whose saved accum_steps is outside the flag's range is refused on resume.
#   tests/apps/hardening_test.sh path/to/sparsetrain path/to/mpirun
set -uo pipefail
# bin, mpirun, a scratch folder as the working one, fail and expect:
# shellcheck source=tests/apps/cli_test.sh
source "$(dirname "$(realpath "$0")")/cli_test.sh" "$@"
run=(train --dataset synthetic --synthetic-size 64 -b 16 --test-subset 16 --eval-batches 1
     --workers 0 --threads 1 -q)
mpi() { timeout 60 "$mpirun" --allow-run-as-root --oversubscribe "$@"; }


mknod node c 1 3 || fail "mknod"
expect trace_node "--trace node: node is a device node" "$bin" "${run[@]}" --max-iters 1 --trace node --out a
[[ -c node ]] || fail "the device node was replaced"
mkdir folder
expect trace_folder "folder is a folder" "$bin" "${run[@]}" --max-iters 1 --trace folder --out a
ln -s node link
expect trace_link "link is a symlink" "$bin" "${run[@]}" --max-iters 1 --trace link --out a
expect out_root "--out / is the file-system root" "$bin" "${run[@]}" --max-iters 1 --out /
expect out_empty "--out is empty" "$bin" "${run[@]}" --max-iters 1 --out ''
touch afile
expect out_file "--out afile is a file, not a folder" "$bin" "${run[@]}" --max-iters 1 --out afile
mkdir b && echo keep >victim && ln -s ../victim b/iterations.csv
expect out_link "b/iterations.csv is a symlink" "$bin" "${run[@]}" --max-iters 1 --out b
[[ $(cat victim) == keep ]] || fail "a symlink's target was written"
expect pack_file "pack --out afile is a file" "$bin" pack --data-dir nowhere --out afile
mkdir -p images/train/c1
expect pack_size "pack: --pack-size must be > 0, got 0" "$bin" pack --data-dir images --out p \
  --pack-size 0
expect pack_workers "pack: --workers must be > 0, got 0" "$bin" pack --data-dir images --out p \
  --workers 0

# A resume through a symlink into --out continues the run (nothing deleted).
"$bin" "${run[@]}" --max-iters 2 --out r >/dev/null 2>&1 || fail "first run"
ln -s r/checkpoint.safetensors L
"$bin" "${run[@]}" --max-iters 4 --out r --resume L --overwrite >/dev/null 2>&1 ||
  fail "resume through a symlink with --overwrite failed"
[[ $(tail -n 1 r/iterations.csv | cut -d, -f3) == 4 ]] || fail "the resumed run lost its history"
# A hard link of the checkpoint in another folder would be deleted by --overwrite.
mkdir other && ln r/checkpoint.safetensors other/ck.safetensors
"$bin" "${run[@]}" --max-iters 2 --out s >/dev/null 2>&1 || fail "run s"
ln -f r/checkpoint.safetensors s/checkpoint.safetensors
expect overwrite_resumed "--overwrite would delete" "$bin" "${run[@]}" --max-iters 6 --out s \
  --resume other/ck.safetensors --overwrite
[[ -f other/ck.safetensors ]] || fail "the resumed checkpoint was deleted"

# The folder itself is locked: deleting the lock file does not admit a second run.
"$bin" train --dataset synthetic --synthetic-size 4096 -b 16 --epochs 50 --workers 0 --threads 1 -q \
  --out busy >busy.log 2>&1 &
owner=$!
for _ in $(seq 100); do [[ -f busy/.sparsetrain.lock ]] && break; sleep 0.1; done
[[ -f busy/.sparsetrain.lock ]] || fail "the long run did not start: $(cat busy.log)"
rm -f busy/.sparsetrain.lock
expect second_run "--out busy is in use by another run" "$bin" "${run[@]}" --max-iters 1 --out busy --overwrite
kill -INT "$owner"
wait "$owner"

# Ranks that disagree end on every rank, naming what they disagree on.
two_ranks() {  # two_ranks NAME MESSAGE "ARGS OF RANK 0" "ARGS OF RANK 1"
  local name=$1 msg=$2
  read -r -a a <<<"$3"
  read -r -a b <<<"$4"
  mpi -np 1 "$bin" "${a[@]}" : -np 1 "$bin" "${b[@]}" >"$name.log" 2>&1
  [[ $? -ne 124 ]] || fail "$name: still running after 60 s"
  for r in 0 1; do
    grep -q "error on rank $r of 2: .*$msg" "$name.log" || fail "$name: rank $r did not say '$msg': $(cat "$name.log")"
  done
}
common="${run[*]} --max-iters 2 --out m"
two_ranks device "disagree on --device: rank 0 has 'emu', rank 1 has 'cpu'" "$common --device emu" "$common --device cpu"
two_ranks check_flags "disagree on --check-flags" "$common --check-flags" "$common"
two_ranks subcommand "disagree on the subcommand: rank 0 has 'train', rank 1 has 'eval'" "$common" "eval x.safetensors"
two_ranks comm "disagree on --comm: rank 0 has 'mpi', rank 1 has 'local'" "$common --comm mpi" "$common --comm local"
"$bin" "${run[@]}" --max-iters 3 --out c3 >/dev/null 2>&1 || fail "run c3"
"$bin" "${run[@]}" --max-iters 2 --out c2 >/dev/null 2>&1 || fail "run c2"
two_ranks resume "disagree on --resume: rank 0 has 'step 2, data checksum" \
  "$common --resume c2/checkpoint.safetensors" "$common --resume c3/checkpoint.safetensors"

SPARSETRAIN_EMU_DELAY_US=-5 expect emu_delay "SPARSETRAIN_EMU_DELAY_US=-5: expected a whole number" \
  "$bin" "${run[@]}" --max-iters 1 --device emu --out e
expect scope_number "--sp scope=tensor selects per tensor" "$bin" "${run[@]}" --check-flags \
  --sparsifier topk --hierarchy 2 --sp scope=1
expect scope_node "--hierarchy node: --sp scope=tensor selects per tensor" "$bin" "${run[@]}" \
  --check-flags --sparsifier topk --hierarchy node --sp scope=1

for sp in "--density 1" "--sp block=2"; do
  rm -rf f
  "$bin" "${run[@]}" --max-iters 3 --sparsifier fft $sp --out f >/dev/null 2>&1 || fail "fft $sp"
  col=$(head -n 1 f/iterations.csv | tr ',' '\n' | grep -n '^sp_density$' | cut -d: -f1)
  tail -n +2 f/iterations.csv | cut -d, -f"$col" | awk -v sp="$sp" \
    '$1 < 0 || $1 > 1 { print "fft " sp ": sp_density " $1; bad = 1 } END { exit bad }' ||
    fail "fft density outside [0, 1]"
done

# A saved accum_steps outside the flag's range (written by hand) is refused on resume.
/usr/bin/python3 - c3/checkpoint.safetensors bad.safetensors <<'PY' || fail "editing a checkpoint"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
header["__metadata__"]["accum_steps"] = "2147483648"
header["__metadata__"].pop("sparsetrain.xxh3_64", None)
text = json.dumps(header).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
expect resume_range "accum_steps" "$bin" "${run[@]}" --max-iters 4 --out g --resume bad.safetensors
echo "hardening_test: ok"
