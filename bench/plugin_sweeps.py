"""Measure committed sweep files into stamped results files: the comparison table's (docs/plugins/papers.md) and any
other ``bench/results/NAME.toml`` a page cites (the fastsac_cpu sweeps of docs/benchmarks/massive.md).

    python bench/plugin_sweeps.py issue33_swingup_td3 issue33_swingup_aro_ddpg # these two sweep files
    python bench/plugin_sweeps.py --all                                        # the comparison's 15 (~3.5 h, 2 cores)

Each NAME is a sweep file ``bench/results/NAME.toml``: it runs as ``jaxrl sweep bench/results/NAME.toml --out
OUT/NAME`` would (in this process, members already finished under OUT reused) and writes
``bench/results/NAME.json``: the sweep's ``results.csv`` rows and ``provenance`` (``jaxrl.provenance.stamp``: this
command, the date the sweep started, the commit and the environment block), from which ``bench/plugin_table.py``
prints the table, and ``curves``: each member's evaluations as ``[env_steps, eval/return, wall_s]`` (``wall_s`` from
the start of its program, compile included), for figures read at a step before the last. A JSON file rather than
the CSV alone because a CSV row cannot hold the nested environment block.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
PREFIXES = ("issue33_", "issue34_", "aql_swingup_")


def sweep_names(comparison_only: bool = True) -> list[str]:
    """The sweep files under bench/results/ by name (without ``.toml``): the comparison's, or all of them."""
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(RESULTS, "*.toml"))
                  if os.path.basename(p).startswith(PREFIXES) or not comparison_only)


def eval_curves(sweep_dir: str, rows: list[dict[str, str]]) -> dict[str, list[list[float]]]:
    """{member_id: [[env_steps, eval/return, wall_s], ...]} from each member's metrics.csv."""
    curves = {}
    for row in rows:
        with open(os.path.join(sweep_dir, "members", row["member_id"], "metrics.csv"), newline="") as f:
            curves[row["member_id"]] = [[int(m["env_steps"]), round(float(m["eval/return"]), 2),
                                         round(float(m["wall_s"]), 1)]
                                        for m in csv.DictReader(f) if m.get("eval/return") not in (None, "")]
    return curves


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="sweep files under bench/results/, without .toml")
    parser.add_argument("--all", action="store_true", help="every sweep file of the plug-in comparison")
    parser.add_argument("--out", default="/tmp/sweeps", help="where the sweeps' run directories go")
    args = parser.parse_args()
    names = sweep_names() if args.all else args.names
    unknown = sorted(set(names) - set(sweep_names(comparison_only=False)))
    if unknown or not names:
        parser.error(f"unknown sweep {unknown[0]!r}; choose from {', '.join(sweep_names(comparison_only=False))}"
                     if unknown else "name a sweep file or pass --all")
    sys.path.insert(0, ROOT)
    import jax  # noqa: F401 - imported before the stamp so that it records the device

    from experiments import sweep as sweep_lib
    from jaxrl import provenance

    for name in names:
        stamp = provenance.stamp()
        out = os.path.join(args.out, name)
        t0 = time.perf_counter()
        sweep_lib.run_sweep(os.path.join(RESULTS, f"{name}.toml"), out, quiet=True)
        with open(os.path.join(out, "results.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        # A member finished under OUT by other code is reused by the sweep: its row must not pass under this stamp.
        here = sweep_lib.row_commit(stamp["environment"])  # as the sweep writes it in results.csv
        other = sorted({row.get("commit", "") for row in rows} - {here})
        if other:
            raise SystemExit(f"{out}: members measured at {', '.join(other)}, not this checkout's {here}; "
                             f"nothing written for {name} (remove {out} or pass another --out)")
        with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
            json.dump({"provenance": stamp, "sweep": f"jaxrl sweep bench/results/{name}.toml --out {out}",
                       "rows": rows, "curves": eval_curves(out, rows)}, f, indent=1)
            f.write("\n")
        print(f"{name}: {len(rows)} members, {time.perf_counter() - t0:.0f} s -> bench/results/{name}.json",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
