#!/usr/bin/python3
"""The share of the exchange hidden behind backward, read from a Chrome trace
(`sparsetrain train --trace FILE`, docs/TRACE.md): per rank, the time of the exchange
spans on the comm track and the part of it that ran after backward ended (exposed).

  scripts/overlap_from_trace.py TRACE.json

Prints one line (the mean over ranks per traced step: exchange ms, exposed ms, hidden %);
exit 1 when the trace holds no exchange.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline  # noqa: E402  (load() and exposed(): one reading of the trace)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-4].strip())
    ranks, _ = timeline.load(sys.argv[1])
    exchange = exposed = 0.0
    steps = 0
    for tr in ranks.values():
        spans = [e for e in tr.get("comm", [])
                 if not e["mark"] and not e["name"].startswith("wait for peers")]
        exchange += sum(e["t1"] - e["t0"] for e in spans)
        exposed += sum(t1 - t0 for t0, t1 in timeline.exposed(tr))
        steps += sum(1 for e in tr.get("backward", []) if e["name"].startswith("backward step"))
    if exchange <= 0 or steps == 0:
        print("no exchange spans in the trace")
        return 1
    hidden = max(0.0, 1.0 - exposed / exchange)
    print(f"exchange {exchange / steps:.2f} ms per step, exposed {exposed / steps:.2f} ms, "
          f"hidden {100 * hidden:.0f}% (over {len(ranks)} ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
