#!/usr/bin/python3
"""Copies a reproduce.sh report into a Markdown document between two markers, so a
results page can quote the runner's tables verbatim and be refreshed after more runs:

    scripts/fill_report.py runs/reproduce docs/results/reproduction.md full

replaces everything between `<!-- full:begin -->` and `<!-- full:end -->` with
runs/reproduce/report.md (its title dropped, its sections demoted one level)."""
import argparse
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="a reproduce.sh --out folder holding report.md")
    ap.add_argument("doc", help="the Markdown file to fill in")
    ap.add_argument("tag", help="marker name: <!-- TAG:begin --> ... <!-- TAG:end -->")
    a = ap.parse_args()
    report = os.path.join(a.out, "report.md")
    if not os.path.exists(report):
        sys.exit(f"fill_report: {report} does not exist; run scripts/reproduce.sh "
                 f"--out {a.out} --report-only first")
    rep = open(report).read()
    rep = re.sub(r"^# .*\n", "", rep, count=1).replace("\n## ", "\n### ")
    doc = open(a.doc).read()
    begin, end = f"<!-- {a.tag}:begin -->", f"<!-- {a.tag}:end -->"
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        sys.exit(f"fill_report: {a.doc} has no '{begin}' ... '{end}' pair")
    doc = doc[:i + len(begin)] + "\n" + rep.strip() + "\n" + doc[j:]
    with open(a.doc + ".tmp", "w") as f:  # no half-written document on an interrupt
        f.write(doc)
    os.replace(a.doc + ".tmp", a.doc)
    print(f"fill_report: {report} -> {a.doc} [{a.tag}]")


if __name__ == "__main__":
    main()
