"""Measure the comparison table's sweeps (docs/plugins/papers.md) into stamped results files.

    python bench/plugin_sweeps.py issue33_swingup_td3 issue33_swingup_aro_ddpg     # these two sweep files
    python bench/plugin_sweeps.py --all                                             # all 15 (about 3.5 h on 2 cores)

Each NAME is a sweep file ``bench/results/NAME.toml``: it runs as ``jaxrl sweep bench/results/NAME.toml --out
OUT/NAME`` would (in this process, members already finished under OUT reused) and writes
``bench/results/NAME.json``: the sweep's ``results.csv`` rows and ``provenance`` (``jaxrl.provenance.stamp``: this
command, the date the sweep started, the commit and the environment block), from which ``bench/plugin_table.py``
prints the table. A JSON file rather than the CSV alone because a CSV row cannot hold the nested environment block.
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


def sweep_names() -> list[str]:
    """The comparison's sweep files, by name (without ``.toml``)."""
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(RESULTS, "*.toml"))
                  if os.path.basename(p).startswith(PREFIXES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="sweep files under bench/results/, without .toml")
    parser.add_argument("--all", action="store_true", help="every sweep file of the comparison")
    parser.add_argument("--out", default="/tmp/sweeps", help="where the sweeps' run directories go")
    args = parser.parse_args()
    names = sweep_names() if args.all else args.names
    unknown = sorted(set(names) - set(sweep_names()))
    if unknown or not names:
        parser.error(f"unknown sweep {unknown[0]!r}; choose from {', '.join(sweep_names())}" if unknown
                     else "name a sweep file or pass --all")
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
                       "rows": rows}, f, indent=1)
            f.write("\n")
        print(f"{name}: {len(rows)} members, {time.perf_counter() - t0:.0f} s -> bench/results/{name}.json",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
