"""Fingerprints of every registered agent's short run: did an engine change move any built-in agent's numbers?

    python bench/fingerprint.py [agents...] > before.txt   # on the old code
    python bench/fingerprint.py [agents...] > after.txt    # on the new code; diff the two

Each agent trains 2 seeds for 800 env steps on toy/Pendulum (4 envs, two chunks, updates from env step 200,
batch 32) at its default widths (TD-MPC2 at small ones: its default planner takes most of an hour here; SimbaV2's
and CrossQ's critics at 128 and 256 wide instead of 512 and 2048: 100 s each in the test suite otherwise); the
line is a SHA-256 of every leaf of the final training state (but its hyperparameters, which are inputs: a Config
field added later adds a leaf there) and of every chunk's metrics, bit for bit, with the last evaluation returns
beside it to read. To fingerprint an older commit, point ``--tree`` at a worktree of it
(PYTHONPATH does not do it: the editable install's import hook comes first):

    git worktree add /tmp/old REV && python bench/fingerprint.py --tree /tmp/old > before.txt

The committed fingerprints (``bench/results/fingerprints.json``, checked by ``tests/test_fingerprints.py`` under
the lock) are written by

    python bench/fingerprint.py --record

which replaces the record of this stack and CPU instruction set (or adds one) with every agent's line, the
command, date and ``jaxrl.provenance`` block. XLA's CPU code is generated for the host's vector extensions, so
the same code and stack hash differently on a CPU without AVX-512 (``XLA_FLAGS=--xla_cpu_max_isa=AVX2`` shows it
here): records are per instruction set.
"""
import datetime
import hashlib
import json
import os
import sys

if len(sys.argv) > 2 and sys.argv[1] == "--tree":
    sys.path.insert(0, sys.argv[2])
    del sys.argv[1:3]

import jax
import numpy as np

import envs
from agents import REGISTERED, get_agent
from jaxrl.loop import LoopConfig, make_train

RECORDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "fingerprints.json")

SMALL_TDMPC2 = dict(latent_dim=16, hidden_dim=32, encoder_dim=32, num_samples=32, num_elites=4, num_pi_trajs=4,
                    iterations=2)
SMALLER = {"tdmpc2": SMALL_TDMPC2, "simbav2": dict(critic_hidden_dim=128),
           "crossq": dict(critic_hidden_sizes=(256, 256))}


def fingerprint(name: str) -> tuple[str, list[float]]:
    agent = get_agent(name)
    loop = LoopConfig(steps=800, num_envs=4, num_eval_envs=2, eval_every=400, learning_starts=200, buffer_size=4000,
                      **{k: v for k, v in agent.loop_defaults.items() if k in ("updates_per_step", "n_step")})
    cfg = agent.Config().replace(batch_size=32, **SMALLER.get(name, {}))
    trainer = make_train(agent, envs.make("toy/Pendulum", loop.num_envs), envs.make("toy/Pendulum", 2), loop, cfg)
    state = trainer.init(0, 2)
    digest = hashlib.sha256()
    for _ in range(2):
        state, metrics = trainer.run_chunk(state)
        for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(metrics))[0]:
            digest.update(jax.tree_util.keystr(path).encode() + np.asarray(leaf).tobytes())
    for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(state))[0]:
        if not jax.tree_util.keystr(path).startswith(".hparams"):  # inputs: a Config field added later adds a leaf
            digest.update(np.asarray(leaf).tobytes())
    return digest.hexdigest()[:16], np.asarray(metrics["eval/return"]).round(3).tolist()


def stack_key(environment: dict) -> dict:
    """What a fingerprint depends on besides the code: the numerics libraries' versions and the CPU's vector
    extensions (and the XLA flags, which can restrict them)."""
    from jaxrl import provenance  # here: an older tree (--tree) has no such module

    return {"packages": {name: environment["packages"].get(name) for name in provenance.PACKAGES},
            "cpu_extensions": environment["cpu"]["extensions"],
            "xla_flags": environment.get("variables", {}).get("XLA_FLAGS")}


def matching_record(records: list[dict], environment: dict) -> dict | None:
    """The committed record measured under this stack and instruction set, if any."""
    key = stack_key(environment)
    return next((r for r in records if stack_key(r["environment"]) == key), None)


def load_records(path: str = RECORDS) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["records"]


def record(names: list[str], path: str = RECORDS) -> dict:
    """Fingerprint ``names`` and write them as this stack's record (replacing the one of the same stack key)."""
    from jaxrl import provenance

    environment = provenance.environment()
    entry = {"command": "python bench/fingerprint.py --record", "date": datetime.date.today().isoformat(),
             "commit": environment["git"].get("commit"), "environment": environment, "agents": {}}
    for name in names:
        digest, returns = fingerprint(name)
        entry["agents"][name] = {"hash": digest, "eval_returns": returns}
        print(name, digest, returns, flush=True)
    records = [r for r in load_records(path) if stack_key(r["environment"]) != stack_key(environment)]
    with open(path, "w") as f:
        json.dump({"records": [*records, entry]}, f, indent=1)
        f.write("\n")
    return entry


if __name__ == "__main__":
    if sys.argv[1:2] == ["--record"]:
        record(sys.argv[2:] or sorted(REGISTERED))
        print(f"recorded in {RECORDS}", file=sys.stderr)
        sys.exit(0)
    for name in sys.argv[1:] or sorted(REGISTERED):
        print(name, *fingerprint(name), flush=True)
    print("code from", envs.__file__.rsplit("/envs/", 1)[0], file=sys.stderr)
