"""Fingerprints of every registered agent's short run: did an engine change move any built-in agent's numbers?

    python bench/fingerprint.py [agents...] > before.txt   # on the old code
    python bench/fingerprint.py [agents...] > after.txt    # on the new code; diff the two

Each agent trains 2 seeds for 800 env steps on toy/Pendulum (4 envs, two chunks, updates from env step 200,
batch 32) at its default widths; the line is a SHA-256 of every leaf of the final training state and of every
chunk's metrics, bit for bit, with the last evaluation returns beside it to read.
"""
import hashlib
import sys

import jax
import numpy as np

import envs
from agents import REGISTERED, get_agent
from jaxrl.loop import LoopConfig, make_train


def fingerprint(name: str) -> tuple[str, list[float]]:
    agent = get_agent(name)
    loop = LoopConfig(steps=800, num_envs=4, num_eval_envs=2, eval_every=400, learning_starts=200, buffer_size=4000,
                      **{k: v for k, v in agent.loop_defaults.items() if k in ("updates_per_step", "n_step")})
    cfg = agent.Config().replace(batch_size=32)
    trainer = make_train(agent, envs.make("toy/Pendulum", loop.num_envs), envs.make("toy/Pendulum", 2), loop, cfg)
    state = trainer.init(0, 2)
    digest = hashlib.sha256()
    for _ in range(2):
        state, metrics = trainer.run_chunk(state)
        for key in sorted(metrics):
            digest.update(key.encode() + np.asarray(jax.device_get(metrics[key])).tobytes())
    for leaf in jax.tree.leaves(jax.device_get(state)):
        digest.update(np.asarray(leaf).tobytes())
    return digest.hexdigest()[:16], np.asarray(metrics["eval/return"]).round(3).tolist()


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(REGISTERED):
        print(name, *fingerprint(name), flush=True)
