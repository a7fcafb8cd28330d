"""The docs' reproduction table, printed from ``jaxrl reproduce`` reports (their ``report.json``).

    jaxrl reproduce sac_dmc --tasks dmc/BallInCup dmc/FingerSpin dmc/WalkerWalk --steps 100000 --seeds 3 \\
        --out reproduce/sac_dmc
    cp reproduce/sac_dmc/report.json bench/results/reproduce_sac_dmc.json
    python bench/reproduce_table.py bench/results/reproduce_sac_dmc.json

A report keeps each seed's return at every published evaluation point, the command that trains the same runs,
the date it was written and each run's environment block (``jaxrl.provenance``): the table says which command
and stack measured it, and ``tests/test_figures.py`` checks the docs' copy against this script's output.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _number(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def table(paths: list[str]) -> str:
    sys.path.insert(0, ROOT)
    from jaxrl import provenance

    lines = ["| task | env steps | ours: mean ± std (seed 0 / 1 / ...) | published mean ± std (seeds) "
             "| (ours − published) / published std |", "|---|---|---|---|---|"]
    sources = []
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        for row in report["rows"]:
            seeds = " / ".join(f"{r:.0f}" for r in row["returns"])
            if row["not_comparable"]:
                published = "not comparable"
            elif "published_mean" in row:
                published = (f"{_number(row['published_mean'])} ± {_number(row['published_std'])} "
                             f"({row['published_seeds']})")
            else:
                published = "none at this step"
            lines.append(f"| `{row['task']}` | {row['env_steps']:,} | **{_number(row['mean'])} ± "
                         f"{_number(row['std'])}** ({seeds}) | {published} | {_number(row.get('z'), 2)} |")
        stacks = {provenance.summary_line(block) for block in report["environments"].values()}
        runs = " and ".join(sorted(stacks))
        sources.append(f"`{report['command']}` (report written {report['written']}; runs: {runs})")
    return "\n".join(lines) + "\n\nMeasured by " + ", and ".join(sources) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", help="report.json files of jaxrl reproduce")
    print(table(parser.parse_args().reports))


if __name__ == "__main__":
    main()
