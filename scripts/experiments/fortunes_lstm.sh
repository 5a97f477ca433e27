#!/usr/bin/env bash
# The LSTM language-model runs behind docs/RESULTS.md: the 2-layer LSTM (hidden
# 200) on the fortunes corpus against PyTorch 1.13, and dense vs MiCRO on 4 ranks.
# A finished run (epochs.csv has all epochs) is skipped.
#   scripts/experiments/fortunes_lstm.sh [build-dir] [run-name ...]
source "$(dirname "$0")/common.sh"
epochs=3

want() { [[ ${#selected[@]} -eq 0 ]] || [[ " ${selected[*]} " == *" $1 "* ]]; }
selected=("$@")

# One process, 2 threads each: sparsetrain vs PyTorch on the same split, then step times.
if want lstm_compare; then
  if [[ $(done_epochs lstm_compare/sparsetrain) -ge $epochs && -f runs/lstm_compare/summary.json ]]; then
    echo "== lstm_compare: done, skipped"
  else
    /usr/bin/python3 bench/compare_lstm.py --build "$build" --epochs $epochs --threads 2 \
      --out runs/lstm_compare | tee runs/lstm_compare.jsonl
    tail -n 1 runs/lstm_compare.jsonl >runs/lstm_compare/summary.json
  fi
fi

# 4 ranks x 20 streams, 1 thread each: dense vs MiCRO at d = 0.01 (clipping is local).
for sp in dense micro; do
  name=lstm_np4_$sp
  want "$name" || continue
  if [[ $(done_epochs "$name") -ge $epochs ]]; then
    echo "== $name: done, skipped"
    continue
  fi
  rm -rf "runs/$name"
  extra=()
  [[ $sp == dense ]] || extra=(--sparsifier "$sp" --density 0.01)
  echo "== $name"
  /usr/bin/time -f "$name wall %e s" "${mpi[@]}" -np 4 "$bin" train --arch lstm --threads 1 \
    --workers 1 --epochs $epochs --log-every 50 "${extra[@]}" --out "runs/$name" 2>&1 | tail -n 4
done
