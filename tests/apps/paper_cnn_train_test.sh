#!/usr/bin/env bash
# The papers' CIFAR CNNs (--arch googlenet, --arch senet18; the MiCRO, ExDyna and SIDCo
# experiments' models) under the papers' methods at d = 0.01 on 4 ranks, from the command
# line, on a small CIFAR-10-format set written here (each class its own colour and stripe
# period, plus noise, so a network learns it in a few steps):
#  - each model with each of MiCRO and ExDyna runs two epochs to the end, and the second
#    epoch's training loss is below the first's;
#  - a run stopped mid-way through epoch 2 (--max-iters) and resumed ends with the
#    uninterrupted run's checkpoint bit for bit (parameters, optimiser and sparsifier state)
#    and the same epochs.csv losses: GoogLeNet with MiCRO and SENet-18 with ExDyna, so each
#    model and each method's state goes through a resume once.
# GoogLeNet costs about 1.5 GFLOPs per 32x32 image forward, SENet-18 about 0.56: to stay
# within about two and a half minutes on 2 shared cores the runs take 96 training images
# (4 per rank, 6 steps an epoch) and evaluate on the first 32 of the 100 test images.
#   tests/apps/paper_cnn_train_test.sh path/to/sparsetrain mpiexec
set -uo pipefail
bin=$1
mpiexec=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mpi() { local np=$1; shift; "$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$@"; }

# The CLI reads CIFAR-10 only at its official sizes (5 x 10000 training records, 10000 test
# records of 1 label byte + R, G, B planes of 32x32): the first records carry the signal,
# the rest are zeros (sparse files) that --train-subset / --test-subset leave out.
train_n=96
test_n=100
/usr/bin/python3 - "$tmp/cifar" $train_n $test_n <<'PY' || fail "could not write the CIFAR-10 files"
import os, sys
import numpy as np

out, train_n, test_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
record, per_file = 1 + 3 * 32 * 32, 10000
os.makedirs(out)
# Ten colours far apart, and a horizontal stripe period per class (random crops and
# horizontal flips keep both).
colours = np.array([[220, 40, 40], [40, 220, 40], [40, 40, 220], [220, 220, 40], [220, 40, 220],
                    [40, 220, 220], [230, 230, 230], [30, 30, 30], [230, 130, 30], [120, 60, 180]])
rows = np.arange(32)

def records(n, seed):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    img = colours[labels][:, :, None, None] * np.ones((1, 1, 32, 32))
    stripes = np.where((rows // (labels[:, None] % 4 + 1)) % 2 == 0, 25.0, -25.0)
    img += stripes[:, None, :, None] + rng.normal(0, 30, img.shape)
    pixels = np.clip(img, 0, 255).astype(np.uint8).reshape(n, -1)
    return np.concatenate([labels.astype(np.uint8)[:, None], pixels], axis=1).tobytes()

def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
        f.truncate(per_file * record)

write("data_batch_1.bin", records(train_n, 1))
for i in range(2, 6):
    write(f"data_batch_{i}.bin", b"")
write("test_batch.bin", records(test_n, 2))
PY

# 96 images, 4 per rank on 4 ranks: 6 steps per epoch. A constant rate of 0.01: the default
# multistep schedule would cut it ten-fold for the second of two epochs.
steps_per_epoch=6
common=(--dataset cifar10 --data-dir "$tmp/cifar" --train-subset $train_n --test-subset 32
        -b 4 --lr 0.01 --schedule constant --density 0.01 --epochs 2 --seed 5 --threads 1
        --workers 0 -q)
losses() {  # the train_loss column of epochs.csv, one value a line
  /usr/bin/python3 -c '
import csv, sys
for row in csv.DictReader(open(sys.argv[1])):
    print(row["train_loss"])' "$1"
}

check() {  # check ARCH METHOD [resume]
  local name=$1_$2 run=("${common[@]}" --arch "$1" --sparsifier "$2") resume=${3:-}
  local start=$SECONDS
  mpi 4 "$bin" train "${run[@]}" --out "$tmp/$name" >"$tmp/$name.log" 2>&1 ||
    fail "$name: $(grep -m1 error "$tmp/$name.log")"
  mapfile -t loss < <(losses "$tmp/$name/epochs.csv")
  [[ ${#loss[@]} -eq 2 ]] || fail "$name: ${#loss[@]} epoch rows, expected 2: $(cat "$tmp/$name/epochs.csv")"
  /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if b < a else 1)' \
    "${loss[0]}" "${loss[1]}" || fail "$name: training loss did not fall: ${loss[0]} -> ${loss[1]}"

  if [[ $resume != resume ]]; then
    echo "$name: loss ${loss[0]} -> ${loss[1]} ($((SECONDS - start)) s)"
    return
  fi
  # Stopped half-way through epoch 2, then resumed to the end.
  local stop=$((steps_per_epoch + steps_per_epoch / 2))
  mpi 4 "$bin" train "${run[@]}" --max-iters $stop --out "$tmp/${name}_r" >"$tmp/${name}_r1.log" 2>&1 ||
    fail "$name stopped at step $stop: $(grep -m1 error "$tmp/${name}_r1.log")"
  local last
  last=$(tail -n 1 "$tmp/${name}_r/iterations.csv" | cut -d, -f3)
  [[ $last == "$stop" && $(losses "$tmp/${name}_r/epochs.csv") == "${loss[0]}" ]] ||
    fail "$name: the stopped run ended at step $last with epochs $(losses "$tmp/${name}_r/epochs.csv" | tr '\n' ' ')"
  mpi 4 "$bin" train "${run[@]}" --out "$tmp/${name}_r" --resume "$tmp/${name}_r/checkpoint.safetensors" \
    >"$tmp/${name}_r2.log" 2>&1 || fail "$name resumed: $(grep -m1 error "$tmp/${name}_r2.log")"
  /usr/bin/python3 "$root/scripts/compare_checkpoints.py" --rtol 0 "$tmp/$name/checkpoint.safetensors" \
    "$tmp/${name}_r/checkpoint.safetensors" >"$tmp/cmp.txt" ||
    fail "$name: the resumed run's checkpoint differs from the uninterrupted run's: $(cat "$tmp/cmp.txt")"
  [[ $(losses "$tmp/${name}_r/epochs.csv") == "$(losses "$tmp/$name/epochs.csv")" ]] ||
    fail "$name: resumed epoch losses $(losses "$tmp/${name}_r/epochs.csv" | tr '\n' ' ')differ from" \
      "$(losses "$tmp/$name/epochs.csv" | tr '\n' ' ')"
  echo "$name: loss ${loss[0]} -> ${loss[1]}, resumed at step $stop bit for bit ($((SECONDS - start)) s)"
}

check googlenet micro resume
check googlenet exdyna
check senet18 micro
check senet18 exdyna resume
echo "paper_cnn_train_test: ok"
