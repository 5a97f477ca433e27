#!/usr/bin/env bash
# The tutorial's pages, run and checked (docs/tutorial/; ctest tutorial_pages_run, then
# tutorial_page1..13):
#   tests/tutorial/pages_test.sh BUILD_DIR run RUNS_DIR     every page's command, full length
#   tests/tutorial/pages_test.sh BUILD_DIR check RUNS_DIR PAGE
# `run` is scripts/tutorial_figures.sh into RUNS_DIR (pictures into RUNS_DIR/img) and
# records the wall time of each page; `check` tests that the page's runs finished and its
# pictures were drawn, then every claim of the page (tests/tutorial/claims.py). Pages 2, 4,
# 8 and 9 use the emulated links (network namespaces) only where `ip netns` works (root);
# otherwise they run without the link, their timing claims are skipped, and this says so.
set -euo pipefail
build=$(cd "$1" && pwd)
mode=$2
runs=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
if [[ $mode == run ]]; then
  rm -rf "$runs"
  mkdir -p "$runs"
  start=$(date +%s)
  "$root/scripts/tutorial_figures.sh" "$build" --runs "$runs" --img "$runs/img" | tee "$runs/log.txt"
  echo "tutorial: every page in $(( $(date +%s) - start )) s"
  exit 0
fi
page=$4
[[ -f $runs/link.txt ]] || { echo "FAIL page $page: no tutorial run in $runs" >&2; exit 1; }

fail=0
need() {  # need FILE...: each must exist and be non-empty
  for f in "$@"; do
    if [[ ! -s $runs/$f ]]; then
      echo "FAIL page $page: $f missing or empty" >&2
      fail=1
    fi
  done
}
finished() {  # finished RUN...: a run wrote iterations and a checkpoint
  for r in "$@"; do need "$r/iterations.csv" "$r/checkpoint.safetensors"; done
}
case $page in
  1) finished p1_one_process; need img/01-one-process.png ;;
  2) finished p2_naive; need p2_naive.json img/02-naive-timeline.png ;;
  3) need p3_plan_default.txt p3_plan_fine.txt p3_plan_naive.txt p3_plan_cap01.txt
     need img/03-bucket-plans.png ;;
  4) finished p4_naive p4_no_overlap p4_overlap
     need img/04-no-overlap-timeline.png img/04-overlap-timeline.png img/04-step-breakdown.png ;;
  5) finished p5_none p5_topk p5_topk_no_ef p5_randomk p5_randomk_no_ef p5_randomk_m0 p5_dgc_mc
     need img/05-topk-randomk.png ;;
  6) finished p6_topk_np1 p6_topk_np2 p6_topk_np4 p6_micro_np4 p6_micro_fast_np4
     need img/06-build-up.png ;;
  7) finished p7_exdyna_np4 p7_sidco_e_np4; need img/07-balance-sidco.png img/07-padding.png ;;
  8) need p8_comm_np2_link.jsonl p8_sparsifiers.json p8_projection.jsonl img/08-scaling.png ;;
  9) need p9_algorithms.jsonl img/09-allreduce.png p9_bucket_sweep.jsonl img/09-bucket-sweep.png
     finished p9_cap_1e-9 p9_cap_0.01 p9_cap_0.1 p9_cap_0.25 p9_cap_0.5 p9_cap_25 ;;
  10) finished p10_fp32 p10_accum2 p10_bf16 p10_fp16 p10_wire_bf16
      need img/10-accum-precision.png ;;
  11) finished p11_emu; need p11_emu.json img/11-emu-timeline.png ;;
  12) finished p12_one_np1 p12_kept_np4 p12_scaled_np4 p12_warmup_np4 p12_kept_np16 \
         p12_scaled_np16 p12_warmup_np16
      need p12_lr.jsonl img/12-lr-workers.png ;;
  13) need p13_models.jsonl p13_zero.jsonl img/13-zero.png ;;
  *) echo "pages_test: no page $page" >&2; exit 2 ;;
esac
link=()
[[ $(cat "$runs/link.txt") == none ]] || link=(--link)
/usr/bin/python3 "$root/tests/tutorial/claims.py" "$runs" "$page" "${link[@]}" || fail=1
[[ $fail == 0 ]] && echo "page $page: ok"
exit $fail
