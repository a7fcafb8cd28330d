"""jaxrl from Python, without the CLI: envs, the compiled program, K seeds, metrics, checkpoints, the harness.

    python experiments/examples/from_python.py        # ~1 minute on a 2-core CPU (tests/test_plugins.py runs it)
"""
import math
import tempfile

import jax
import numpy as np

import envs
from agents import sac
from jaxrl import checkpoint
from jaxrl.loop import LoopConfig, make_train
from jaxrl.testing import check_agent


def main(steps: int = 2_000, seeds: int = 2, check: bool = True) -> dict:
    # 1. The run's settings: the loop's (env steps, envs, chunk = eval_every) and the agent's (traced numbers, static
    #    widths). `jaxrl train --help` lists both with their meanings.
    loop = LoopConfig(steps=steps, num_envs=4, num_eval_envs=4, eval_every=1_000, learning_starts=500,
                      buffer_size=20_000)
    cfg = sac.Config(hidden_sizes=(64, 64), batch_size=64)

    # 2. A new agent (here SAC itself) goes through the harness before it costs a long run: seconds per check.
    if check:
        print("harness:", {name: f"{s:.1f}s" for name, s in check_agent(sac.AGENT, cfg, eager=False).items()})

    # 3. Envs: a batch of num_envs for training and one of num_eval_envs for evaluation (`jaxrl envs` lists names).
    env = envs.make("toy/Pendulum", loop.num_envs)
    eval_env = envs.make("toy/Pendulum", loop.num_eval_envs)

    # 4. The compiled program and its initial state: one pytree holding every seed (leading axis K).
    trainer = make_train(sac.AGENT, env, eval_env, loop, cfg)
    state = trainer.init(0, seeds)  # seed k uses the key of a single run with seed 0 + k

    # 5. Train chunk by chunk: each call runs eval_every env steps and one evaluation inside one compiled program.
    history = []
    for _ in range(math.ceil(loop.steps / trainer.schedule.chunk_env_steps)):
        state, metrics = trainer.run_chunk(state)
        metrics = jax.device_get(metrics)  # per-seed arrays [K]; train/* are means over the chunk's updates
        history.append(metrics)
        print(f"env steps {int(metrics['env_steps'])}: eval return per seed {np.round(metrics['eval/return'], 1)}, "
              f"critic loss {np.round(metrics['train/critic_loss'], 3)}")

    # 6. Save the whole training state and restore it: the restored state continues bitwise.
    with tempfile.TemporaryDirectory() as directory:
        checkpoint.save(checkpoint.manager(directory), int(state.env_steps), state)
        restored, step = checkpoint.restore(directory, jax.eval_shape(lambda: state))
    assert step == int(state.env_steps)
    continued, _ = trainer.run_chunk(jax.tree.map(np.copy, jax.device_get(state)))
    again, _ = trainer.run_chunk(restored)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(continued), jax.tree.leaves(again), strict=True))
    print("restored state continues bitwise")
    return {"history": history, "final_eval": history[-1]["eval/return"]}


if __name__ == "__main__":
    main()
