"""What TD-MPC2 costs per update and per planned step, 3 seeds vmapped, as bench/defaults.py runs it.

    python bench/tdmpc2_cost.py          # the widths bench/defaults.py used first, then its REDUCED ones
    python bench/tdmpc2_cost.py --out bench/results/tdmpc2_cost.jsonl    # the same, appended with provenance
    python bench/tdmpc2_cost.py --table bench/results/tdmpc2_cost.jsonl  # docs/benchmarks/defaults.md's sentence

Shapes of dmc/CartpoleBalance (5 observations, 1 action); the planned step is one MPPI decision for each of 3 seeds
x 10 eval envs (bench/defaults.py's evaluation), the update one gradient step of world model and policy prior;
each the mean of 20 calls after a first that compiles.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit, measured_on, read_rows

from agents import tdmpc2
from bench.defaults import REDUCED
from jaxrl.types import EnvSpec, WindowBatch

SETTINGS = {
    "widths 128, batch 256, 128 samples x 3 iterations": dict(latent_dim=128, hidden_dim=128, encoder_dim=128,
                                                              num_samples=128, num_elites=16, num_pi_trajs=8,
                                                              iterations=3),
    "bench/defaults.py REDUCED": REDUCED["tdmpc2"],
}
SEEDS, EVAL_ENVS = 3, 10


def ms_per_call(fn, *args, repeats=20) -> float:
    jax.block_until_ready(fn(*args))  # compile
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats * 1e3


def measure(name: str, cfg: tdmpc2.Config, out: str | None) -> None:
    spec = EnvSpec(obs_size=5, action_size=1, decisions_per_episode=1000, can_terminate=False)
    states = jax.vmap(lambda k: tdmpc2.init(k, spec, cfg))(jax.random.split(jax.random.PRNGKey(0), SEEDS))
    b, h = cfg.batch_size, cfg.horizon
    batch = WindowBatch(obs=jnp.ones((SEEDS, b, h + 1, 5)), action=jnp.zeros((SEEDS, b, h, 1)),
                        reward=jnp.zeros((SEEDS, b, h)), terminated=jnp.zeros((SEEDS, b, h), bool),
                        truncated=jnp.zeros((SEEDS, b, h), bool), valid=jnp.ones((SEEDS, b), bool))
    keys = jax.random.split(jax.random.PRNGKey(1), SEEDS)
    update = jax.jit(jax.vmap(lambda s, x, k: tdmpc2.update(s, x, k, cfg)[0]))
    plan = jax.jit(jax.vmap(lambda s, o, k, c: tdmpc2.act(s, o, k, cfg, True, c)))
    obs, carry = jnp.ones((SEEDS, EVAL_ENVS, 5)), jnp.zeros((SEEDS, EVAL_ENVS, h, 1))
    emit({"setting": name, "seeds": SEEDS, "eval_envs": EVAL_ENVS,
          "update_ms": round(ms_per_call(update, states, batch, keys), 1),
          "plan_ms": round(ms_per_call(plan, states, obs, keys, carry), 1)}, out)


LABELS = {"widths 128, batch 256, 128 samples x 3 iterations": "widths 128, batch 256 and 128 samples × 3 MPPI "
                                                               "iterations",
          "bench/defaults.py REDUCED": "bench/defaults.py's REDUCED settings"}
DEFAULTS_UPDATES = 20_000  # bench/defaults.py: 20k env steps, one update per env step


def table(path: str) -> str:
    """defaults.md's sentence: each setting's newest line, with the date, commit and CPU of the first setting's, and
    what bench/defaults.py's updates alone would take at the first."""
    rows = {row["setting"]: row for row in read_rows(path)}  # the newest line per setting
    first = rows.get(next(iter(SETTINGS)))
    if first is None:
        raise SystemExit(f"{path}: no line for {next(iter(SETTINGS))!r}: not a file this script wrote")
    parts = [f"at {LABELS.get(name, name)}, {row['update_ms']:.0f} ms per update and {row['plan_ms']:.0f} ms per "
             f"planned eval step of {row['seeds']} seeds × {row['eval_envs']} envs" for name, row in rows.items()]
    hours = DEFAULTS_UPDATES * first["update_ms"] / 3.6e6
    return (f"{'; '.join(parts)} ({measured_on(first['provenance'])}); at the first, a task's {DEFAULTS_UPDATES:,} "
            f"updates alone take {hours:.1f} h")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="also append the JSON lines (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print defaults.md's sentence from this file")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    for name, fields in SETTINGS.items():
        measure(name, tdmpc2.Config(**fields), args.out)


if __name__ == "__main__":
    main()
