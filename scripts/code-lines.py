#!/usr/bin/env python3
"""Code lines per Rust file (non-blank lines that are not `//` comments), largest first; exits 1
when a file of either crate (src/, lab/, tests/, examples/) is over the limit (issue 25: 800).
Usage: scripts/code-lines.py [LIMIT]"""
import os
import sys

limit = int(sys.argv[1]) if len(sys.argv) > 1 else 800
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
counts = []
for top in ("src", "lab", "tests", "examples", "bench"):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                with open(p, encoding="utf-8") as fh:
                    n = sum(1 for l in fh if l.strip() and not l.strip().startswith("//"))
                counts.append((n, os.path.relpath(p, root)))
counts.sort(reverse=True)
over = [(n, p) for n, p in counts if n > limit]
for n, p in counts[:10]:
    print(f"{n:6} {p}")
for n, p in over:
    print(f"over {limit}: {p} ({n} code lines)", file=sys.stderr)
sys.exit(1 if over else 0)
