"""The runs of ``jaxrl reproduce`` without its report: for a machine that trains but lacks the report's libraries.

    python bench/reproduce_runs.py sac_dmc --tasks dmc/FingerSpin --steps 100000 --seeds 3 --out DIR
    jaxrl reproduce sac_dmc --report-only --out DIR      # later, where rliable is installed (this checkout)

Exactly what ``jaxrl reproduce`` trains (``experiments.reproduce``: the same plan, checks and run directories under
``DIR/runs/``), through its Python functions, so neither tyro (the command line) nor rliable (the report's
aggregates) is imported: ``bench/gpu_suite.sh`` runs it on a lent GPU machine, whose runs come back without their
checkpoints (``config.json``, ``metrics.jsonl``, ``summary.json``: all the report reads).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--tasks", nargs="+")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--override", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from experiments import reproduce

    plan = reproduce.make_plan(args.config, args.tasks, args.steps, args.seeds, args.override)
    reproduce.check_run_dirs(plan, args.out)
    reproduce.note_unpublished(plan)
    os.makedirs(args.out, exist_ok=True)
    reproduce.run_tasks(plan, args.out, quiet=False, checked=True)


if __name__ == "__main__":
    main()
