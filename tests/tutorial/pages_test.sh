#!/usr/bin/env bash
# One tutorial page's command, shortened (docs/tutorial/; ctest tutorial_pageN):
#   tests/tutorial/pages_test.sh BUILD_DIR PAGE
# Runs scripts/tutorial_figures.sh --quick --page PAGE into a temporary folder, then checks
# that the page's runs finished and its pictures were drawn. Pages 2, 4 and 8 use the
# 100 Mbit/s network namespace only where `ip netns` works (root); otherwise they run
# without the link, and this says so.
set -euo pipefail
build=$(cd "$1" && pwd)
page=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/tutorial_page"$page".XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/tutorial_figures.sh" "$build" --quick --page "$page" --runs "$tmp" --img "$tmp/img"

fail=0
need() {  # need FILE...: each must exist and be non-empty
  for f in "$@"; do
    if [[ ! -s $tmp/$f ]]; then
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
  2) finished p2_naive; need p2_naive.json img/02-naive-timeline.png
     grep -q "^bucket plan: 59 buckets" "$tmp/p2_naive_plan.txt" ||
       { echo "FAIL page 2: the naive flags must give 59 buckets for ResNet-20" >&2; fail=1; } ;;
  3) need p3_plan_default.txt p3_plan_fine.txt img/03-bucket-plans.png
     grep -q "^bucket plan: 7 buckets" "$tmp/p3_plan_fine.txt" ||
       { echo "FAIL page 3: the finer plan must have 7 buckets" >&2; fail=1; } ;;
  4) finished p4_naive p4_no_overlap p4_overlap
     need img/04-no-overlap-timeline.png img/04-overlap-timeline.png img/04-step-breakdown.png ;;
  5) finished p5_none p5_topk p5_topk_no_ef p5_randomk p5_randomk_no_ef; need img/05-topk-randomk.png ;;
  6) finished p6_topk_np1 p6_topk_np2 p6_topk_np4 p6_micro_np4 p6_micro_fast_np4
     need img/06-build-up.png ;;
  7) finished p7_exdyna_np4 p7_sidco_e_np4; need img/07-balance-sidco.png ;;
  8) need p8_comm_np2_link.jsonl p8_sparsifiers.json img/08-scaling.png ;;
  *) echo "pages_test: no page $page" >&2; exit 2 ;;
esac
[[ $fail == 0 ]] && echo "page $page: ok"
exit $fail
