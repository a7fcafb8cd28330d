"""Issue 35's figure: population-based training against the grid of the same size, same env steps.

    python bench/pbt_vs_grid.py --out /tmp/sweeps/issue35                  # 3 repeats (seeds 0, 1, 2) of each
    python bench/pbt_vs_grid.py --out /tmp/sweeps/issue35 --table-only     # the table from finished sweeps
    python bench/pbt_vs_grid.py --markdown     # the docs' table from the committed CSV alone

The grid is ``bench/results/issue35_pendulum_grid.toml`` (8 SAC members on toy/Pendulum); PBT is the same file
with a ``[pbt]`` table (``issue35_pendulum_pbt.toml``), so its initial population is the grid. One repeat of the
whole experiment is both sweeps with every member on seed R. Per repeat: the population's best member's final
return, the median member's final return, the best evaluation any member reached, and the program's wall time
(compile + run). The cost of one exploit/explore step is timed on PBT's final trained state: the step's own
compiled function with ``due`` true against false (a chunk end without PBT's copy), median of 30 calls; against
the chunk's run time. Writes ``bench/results/issue35_pbt_vs_grid.json``: the rows (each with the commit its sweep's
``results.csv`` names) and ``provenance`` (``jaxrl.provenance.stamp``: the command, date, commit and environment block
of the process that measured them).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
FILES = {"grid": "issue35_pendulum_grid.toml", "pbt": "issue35_pendulum_pbt.toml"}


def sweep_file(method: str, seed: int, where: str) -> str:
    with open(os.path.join(RESULTS, FILES[method])) as f:
        text = re.sub(r"^seeds = \[0\]$", f"seeds = [{seed}]", f.read(), count=1, flags=re.M)
    path = os.path.join(where, f"{method}_seed{seed}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def exploit_explore_ms(group_dir: str, reps: int = 30) -> tuple[float, float]:
    """(ms of a chunk end with exploit/explore, ms without) on the program's final state."""
    import jax
    import jax.numpy as jnp

    from experiments.export import restore_run
    from jaxrl import pbt as pbt_lib

    restored = restore_run(group_dir)
    state, cfg = restored.state, restored.pbt
    eval_return = jnp.asarray(np.random.default_rng(0).normal(size=len(restored.members)), jnp.float32)
    step = jax.jit(lambda s, r, due: pbt_lib.step(cfg, s, r, due))
    times = {}
    for due in (True, False):
        jax.block_until_ready(step(state, eval_return, jnp.bool_(due)))  # compile
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter()
            jax.block_until_ready(step(state, eval_return, jnp.bool_(due)))
            samples.append(1e3 * (time.perf_counter() - t0))
        times[due] = statistics.median(samples)
    return times[True], times[False]


def row_for(method: str, seed: int, out: str) -> dict:
    with open(os.path.join(out, "results.csv"), newline="") as f:
        members = list(csv.DictReader(f))
    final = np.array([float(m["final_eval_return"]) for m in members])
    best = np.array([float(m["best_eval_return"]) for m in members])
    (group,) = {m["group"] for m in members}
    with open(os.path.join(out, "groups", group, "summary.json")) as f:
        summary = json.load(f)
    row = {"method": method, "seed": seed, "members": len(members), "env_steps": int(members[0]["env_steps"]),
           "best_final": final.max(), "median_final": float(np.median(final)), "best_ever": best.max(),
           "compile_s": summary["compile_s"], "run_s": summary["run_s"],
           "chunks": summary["env_steps"] // 1000, "commit": " ".join(sorted({m.get("commit", "") for m in members}))}
    if method == "pbt":
        with_step, without = exploit_explore_ms(os.path.join(out, "groups", group))
        row.update(exploit_explore_ms=with_step, chunk_end_ms=without,
                   copies=sum(r["copied"] == "True" for r in csv.DictReader(open(os.path.join(out, "pbt.csv")))))
    return row


def markdown(path: str = os.path.join(RESULTS, "issue35_pbt_vs_grid.json")) -> str:
    """The docs' table of the committed results: per method, mean ± std over the repeats (and each repeat's value),
    then PBT's cost and copies."""
    with open(path) as f:
        rows = json.load(f)["rows"]

    def stat(rows, name, each=True, unit=""):
        values = np.array([float(r[name]) for r in rows])
        text = f"{values.mean():.0f} ± {values.std():.0f}{unit}"
        return text + (f" ({' / '.join(f'{v:.0f}' for v in values)})" if each else "")

    lines = ["| | best member's final return | median member's final return | best evaluation | run time (compile "
             "apart) |", "|---|---|---|---|---|"]
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        lines.append(f"| {'PBT' if method == 'pbt' else method} | {stat(mine, 'best_final')} | "
                     f"{stat(mine, 'median_final')} | {stat(mine, 'best_ever', each=False)} | "
                     f"{stat(mine, 'run_s', unit=' s')} |")
    pbt = [r for r in rows if r["method"] == "pbt"]
    if pbt:
        lines += ["", f"PBT's cost: one exploit/explore step {np.mean([r['exploit_explore_ms'] for r in pbt]):.0f} ms "
                      f"against {np.mean([r['chunk_end_ms'] for r in pbt]):.0f} ms for the same compiled chunk end "
                      f"without it, a chunk of training {np.mean([r['run_s'] / r['chunks'] for r in pbt]):.0f} s; "
                      f"{np.mean([r['copies'] for r in pbt]):.0f} copies per run."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/sweeps/issue35")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["grid", "pbt"])
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--markdown", action="store_true", help="print the docs' table from the committed results file")
    args = parser.parse_args()
    if args.markdown:
        print(markdown())
        return 0
    sys.path.insert(0, ROOT)
    import jax  # noqa: F401 - imported before the stamp so that it records the device

    from experiments import sweep as sweep_lib
    from jaxrl import provenance

    stamp = provenance.stamp()  # what measured the rows: command, date, commit, environment

    os.makedirs(args.out, exist_ok=True)
    rows = []
    for seed in args.seeds:
        for method in args.methods:
            out = os.path.join(args.out, f"{method}_seed{seed}")
            if not args.table_only:
                t0 = time.perf_counter()
                sweep_lib.run_sweep(sweep_file(method, seed, args.out), out, quiet=True)
                print(f"{method} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
            if os.path.exists(os.path.join(out, "results.csv")):
                rows.append(row_for(method, seed, out))
    if len(rows) != len(args.seeds) * len(args.methods):  # the committed file holds every repeat of both methods
        raise SystemExit(f"{len(rows)} of {len(args.seeds) * len(args.methods)} sweeps finished under {args.out}; "
                         "bench/results/issue35_pbt_vs_grid.json not written")
    with open(os.path.join(RESULTS, "issue35_pbt_vs_grid.json"), "w") as f:
        json.dump({"provenance": stamp, "rows": [{k: (float(v) if isinstance(v, np.floating) else v)
                                                  for k, v in r.items()} for r in rows]}, f, indent=1)
        f.write("\n")
    for method in args.methods:
        mine = [r for r in rows if r["method"] == method]
        if not mine:
            continue

        def stat(name, rows=mine):
            values = np.array([r[name] for r in rows], np.float64)
            return f"{values.mean():.0f} ± {values.std():.0f} ({' / '.join(f'{v:.0f}' for v in values)})"

        line = (f"{method}: {len(mine)} repeats of {mine[0]['members']} members x {mine[0]['env_steps']} env steps; "
                f"best member's final return {stat('best_final')}, median member's final {stat('median_final')}, "
                f"best evaluation {stat('best_ever')}; wall time {stat('run_s')} s run + "
                f"{np.mean([r['compile_s'] for r in mine]):.0f} s compile")
        if method == "pbt":
            line += (f"; exploit/explore {np.mean([r['exploit_explore_ms'] for r in mine]):.2f} ms vs a chunk end "
                     f"without it {np.mean([r['chunk_end_ms'] for r in mine]):.2f} ms, a chunk "
                     f"{1e3 * np.mean([r['run_s'] / r['chunks'] for r in mine]):.0f} ms; "
                     f"{np.mean([r['copies'] for r in mine]):.0f} copies per run")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
