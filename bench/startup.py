"""Time to a fresh run's first step: ``jaxrl train``'s ``compile_s`` (tracing, compiling, the initial state) and its
wall time, for one or more checkouts side by side, with the persistent compilation cache off.

    python bench/startup.py                                            # this checkout, the default run
    git worktree add /tmp/before REV
    python bench/startup.py --trees /tmp/before . --repeats 2 --out bench/results/startup_cpu.jsonl
    python bench/startup.py --table bench/results/startup_cpu.jsonl    # the docs' table
    python bench/startup.py --trees /tmp/before . -- --env brax/hopper --num-envs 4   # other flags of jaxrl train

Each run is ``jaxrl train --steps 2000 --eval-every 1000 --compilation-cache None`` (plus the flags after ``--``) in
its own process, the trees alternating (before, after, before, after, ...) so that a slower minute of the machine
falls on both. A tree is run as ``python -c`` with the tree first on ``sys.path`` (the editable install's import
hook would otherwise pick this checkout). One JSON line per run: the tree's commit, ``compile_s`` (from the run's
summary.json), ``wall_s`` of the process and ``first_chunk_wall_s`` (the first metrics row's ``wall_s``: from the
start of ``train()`` to the end of the first chunk).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit

BASE = ["train", "--steps", "2000", "--eval-every", "1000", "--compilation-cache", "None"]


def commit_of(tree: str) -> str:
    out = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    # bench/results/ aside: the results file this script appends to is in the after tree when it is this checkout.
    dirty = subprocess.run(["git", "-C", tree, "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":(exclude)bench/results"], capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("+changes" if dirty else "")


def one_run(tree: str, flags: list[str]) -> dict:
    tree = os.path.abspath(tree)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        argv = BASE + flags + ["--run-dir", run_dir]
        code = f"import sys; sys.path.insert(0, {tree!r}); from experiments import cli; sys.exit(cli.main({argv!r}))"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=tmp)
        wall = time.perf_counter() - t0
        summary = json.load(open(os.path.join(run_dir, "summary.json")))
        first = json.loads(open(os.path.join(run_dir, "metrics.jsonl")).readline())
    return {"tree": commit_of(tree), "flags": flags, "compile_s": round(summary["compile_s"], 2),
            "first_chunk_wall_s": round(first["wall_s"], 2), "wall_s": round(wall, 2)}


def table(path: str) -> str:
    """Per (flags, tree): the mean compile_s and time to the first chunk over its runs, and each against the first
    tree's (the before)."""
    rows = [json.loads(line) for line in open(path)]
    lines = ["| run | checkout | runs | compile s (mean) | to the first chunk s (mean) | compile vs the first |",
             "|---|---|---|---|---|---|"]
    for flags in dict.fromkeys(json.dumps(r["flags"]) for r in rows):
        group = [r for r in rows if json.dumps(r["flags"]) == flags]
        trees = list(dict.fromkeys(r["tree"] for r in group))
        means = {t: [sum(r[k] for r in group if r["tree"] == t) / sum(r["tree"] == t for r in group)
                     for k in ("compile_s", "first_chunk_wall_s")] for t in trees}
        label = "`jaxrl train " + " ".join(BASE[1:] + json.loads(flags)) + "`"
        for t in trees:
            n = sum(r["tree"] == t for r in group)
            lines.append(f"| {label} | {t} | {n} | {means[t][0]:.1f} | {means[t][1]:.1f} | "
                         f"{means[t][0] / means[trees[0]][0]:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", nargs="+", default=["."], help="checkouts to time, in this order (first: before)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default=None, help="also append the JSON lines (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' table of a results file")
    parser.add_argument("flags", nargs=argparse.REMAINDER, help="after --: more flags for jaxrl train")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
    for _ in range(args.repeats):
        for tree in args.trees:
            emit(one_run(tree, flags), args.out)


if __name__ == "__main__":
    main()
