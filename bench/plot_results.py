"""The docs' learning-curve figures, drawn from committed results files instead of run directories.

    python bench/plot_results.py issue33_swingup_td3 issue34_swingup_symphony --out docs/plot_symphony_swingup.png

Each NAME is a stamped sweep results file, ``bench/results/NAME.json``, whose ``curves`` keep every member's
evaluations (``bench/plugin_sweeps.py`` writes them from the sweep's own metrics). Each file becomes one curve,
labelled as ``jaxrl plot`` labels a sweep directory (its agent, from ``NAME.toml``, and env): the members' mean and
95 % bootstrap band, drawn by ``experiments/plot.py``, so the figure is what ``jaxrl plot`` draws from the sweep
directories. The bootstrap is seeded here, so the same files give the same figure.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def members(name: str) -> list:
    """plot.Member per member of ``bench/results/NAME.json``: its env steps and evaluation returns."""
    import numpy as np

    from experiments import plot

    path = os.path.join(ROOT, "bench", "results", f"{name}.json")
    if not os.path.exists(path):
        raise SystemExit(f"{name}: no bench/results/{name}.json (a stamped sweep's results file)")
    with open(path) as f:
        content = json.load(f)
    if "curves" not in content:
        raise SystemExit(f"{name}: bench/results/{name}.json keeps no curves "
                         "(bench/plugin_sweeps.py --refresh adds them)")
    try:
        with open(os.path.join(ROOT, "bench", "results", f"{name}.toml"), "rb") as f:
            agent = tomllib.load(f)["agent"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
        raise SystemExit(f"{name}: bench/results/{name}.toml, the sweep file naming its agent, cannot be read "
                         f"({type(e).__name__}: {e})") from None
    envs = {row["member_id"]: row["env"] for row in content["rows"]}
    return [plot.Member(name, {"agent": agent, "env": envs[member_id]}, np.array([p[0] for p in points], np.float64),
                        np.array([p[1] for p in points], np.float64))
            for member_id, points in content["curves"].items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="+", metavar="NAME", help="results files, bench/results/NAME.json")
    parser.add_argument("--out", required=True, help="the figure to write (png, svg, pdf, ...)")
    args = parser.parse_args()
    import numpy as np

    from experiments import plot

    inputs = [(name, members(name)) for name in args.names]
    curves = []
    for label, grouped in plot.group_members(inputs, None).items():
        np.random.seed(0)  # rliable's bootstrap draws from NumPy's global generator: the same band every time
        curves.append(plot.curve(label, grouped))
    envs = sorted({m.config["env"] for _, ms in inputs for m in ms})
    print(plot.draw(curves, args.out, "eval/return", plot.X_AXES["env_steps"], ", ".join(envs)))


if __name__ == "__main__":
    main()
