"""Why TD3's evaluation return on inverted pendulum jumps between 1000 and ~50: the measurements on docs/agents/td3.md.

    python bench/td3_stability.py                      # ours: brax/inverted_pendulum, 3 vmapped seeds, 30k env steps
    python bench/td3_stability.py --normalize-obs      # the same with observation normalisation
    python bench/td3_stability.py --sbx                # SBX's TD3 on Gymnasium's InvertedPendulum-v5, same settings
                                                       # (needs the bench extra: see bench/vs_sbx.py)

Ours prints one JSON line per 1000 env steps with, per seed: the loop's deterministic evaluation (mean of 10
episodes), the min and max over 10 further deterministic episodes (is the evaluation all-or-nothing?), the mean
training-episode return (with exploration noise), and from the sampled batches: the critic's action gap
Q1(s, pi(s)) - max(Q1(s, pi(s) - d), Q1(s, pi(s) + d)) for d = 0.1 and 0.3 (how sharply it ranks actions),
the mean |dQ1/da| at pi(s) (the actor's gradient signal), the fraction of saturated actions |pi(s)| > 0.99, the mean
Q and the fraction of terminal transitions (failures) in the batch. Settings are TD3's defaults with 4 envs and
2000 warm-up steps (what bench/defaults.py runs). SBX gets the same networks, optimiser, noise, delay and warm-up,
one env, and prints its deterministic evaluation (5 episodes) every 2000 env steps.

``--out FILE`` also writes the lines to FILE after a first line holding the ``jaxrl.provenance`` stamp (command,
date, commit, environment block), as ``bench/results/td3_stability_normalize_obs.jsonl`` and
``bench/results/td3_stability_sbx.jsonl`` were written; with ``--sbx`` the line after the stamp names SBX's own stack
(sbx-rl, stable-baselines3, gymnasium, mujoco, torch, jax).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TASK = "brax/inverted_pendulum"


def emitter(out: str | None):
    """print(json line), and append it to ``out`` (opened fresh, its first line the stamp) when given."""
    if out:
        from jaxrl import provenance

        stamp = provenance.stamp()  # before the file is opened: rewriting a committed one is not an edit of the code
        with open(out, "w") as f:
            f.write(json.dumps({"provenance": stamp}) + "\n")

    def emit(row: dict) -> None:
        print(json.dumps(row), flush=True)
        if out:
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")

    return emit


def ours(steps: int, normalize_obs: bool, seeds: int, emit) -> None:
    import jax
    import jax.numpy as jnp

    import envs
    from agents import td3
    from jaxrl.evaluate import evaluate
    from jaxrl.loop import LoopConfig, make_train
    from jaxrl.normalization import normalize

    def critic_loss(critic_params, state, batch, key, cfg):
        loss, info = td3.critic_loss(critic_params, state, batch, key, cfg)
        action = state.actor.apply(state.actor_params, batch.obs)
        q1 = lambda a: state.critic.apply(critic_params, batch.obs, a)[0, :, 0]  # noqa: E731
        for delta in (0.1, 0.3):
            worse = jnp.maximum(q1(jnp.clip(action - delta, -1, 1)), q1(jnp.clip(action + delta, -1, 1)))
            info[f"gap{delta}"] = jnp.mean(q1(action) - worse)
        info["dq_da"] = jnp.mean(jnp.abs(jax.grad(lambda a: jnp.sum(q1(a)))(action)))
        info["saturated"] = jnp.mean(jnp.abs(action) > 0.99)
        info["terminal_frac"] = jnp.mean(batch.terminated.astype(jnp.float32))
        return loss, info

    cfg = td3.Config()
    loop = LoopConfig(steps=steps, num_envs=4, eval_every=1000, num_eval_envs=10, learning_starts=2000,
                      normalize_obs=normalize_obs)
    agent = td3.AGENT._replace(update=td3.make_update(critic_loss_fn=critic_loss))
    eval_env = envs.make(TASK, 10)
    trainer = make_train(agent, envs.make(TASK, loop.num_envs), eval_env, loop, cfg)
    state = trainer.init(0, seeds)

    @jax.jit
    def episode_returns(agent_state, stats, key):
        """10 single-episode evaluations per seed (``jaxrl.evaluate`` averages over its envs, so one env each)."""
        def one(agent_state, stats, key):
            def policy(obs, carry, key):
                obs = normalize(stats.obs, obs) if normalize_obs else obs
                return td3.act(agent_state, obs, key, cfg, True, carry)

            return jax.vmap(lambda k: evaluate(eval_env, policy, k, 1))(jax.random.split(key, 10))

        return jax.vmap(one)(agent_state, stats, jax.random.split(key, seeds))

    t0 = time.perf_counter()
    for chunk in range(steps // 1000):
        state, m = trainer.run_chunk(state)
        m = jax.device_get(m)
        per_episode = jax.device_get(episode_returns(state.agent, state.normalizers, jax.random.PRNGKey(chunk)))
        row = {"step": int(m["env_steps"]), "eval": [round(float(x)) for x in m["eval/return"]],
               "episode_min": [round(float(x)) for x in per_episode.min(1)],
               "episode_max": [round(float(x)) for x in per_episode.max(1)],
               # NaN where no training episode ended in these 1000 steps (every env balanced throughout)
               "train_return": [None if x != x else round(float(x)) for x in m["train/episode_return"]]}
        for name in ("gap0.1", "gap0.3", "dq_da", "saturated", "q_mean", "terminal_frac"):
            row[name] = [round(float(x), 3) for x in m[f"train/{name}"]]
        emit(row)
    emit({"normalize_obs": normalize_obs, "wall_s": round(time.perf_counter() - t0)})


def sbx_td3(steps: int, seeds: int, emit) -> None:
    from importlib import metadata

    import gymnasium as gym
    import numpy as np
    import sbx
    from stable_baselines3.common.noise import NormalActionNoise

    def evaluate(model, env, episodes=5):
        returns = []
        for episode in range(episodes):
            obs, _ = env.reset(seed=1000 + episode)
            done, total = False, 0.0
            while not done:
                obs, reward, terminated, truncated, _ = env.step(model.predict(obs, deterministic=True)[0])
                total += reward
                done = terminated or truncated
            returns.append(total)
        return float(np.mean(returns))

    # the stamp's environment block names jaxrl's stack; the other library's stack goes in the first line
    emit({"sbx_packages": {name: metadata.version(name) for name in
                           ("sbx-rl", "stable-baselines3", "gymnasium", "mujoco", "torch", "jax")}})
    for seed in range(seeds):
        env, eval_env = gym.make("InvertedPendulum-v5"), gym.make("InvertedPendulum-v5")
        max_action = float(env.action_space.high[0])  # 3: noise scales by it, as in the official code
        model = sbx.TD3("MlpPolicy", env, learning_rate=3e-4, batch_size=256, learning_starts=2000, train_freq=1,
                        gradient_steps=1, tau=0.005, gamma=0.99, policy_delay=2, target_policy_noise=0.2,
                        target_noise_clip=0.5, policy_kwargs=dict(net_arch=[256, 256]), seed=seed, verbose=0,
                        action_noise=NormalActionNoise(np.zeros(1), 0.1 * max_action * np.ones(1)))
        curve, t0 = [], time.perf_counter()
        for k in range(steps // 2000):
            model.learn(total_timesteps=2000, reset_num_timesteps=(k == 0))
            curve.append(round(evaluate(model, eval_env), 1))
        emit({"sbx_td3_seed": seed, "eval_every_2000": curve, "wall_s": round(time.perf_counter() - t0)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None, help="env steps (default 30000 ours, 20000 SBX)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--normalize-obs", action="store_true")
    parser.add_argument("--sbx", action="store_true")
    parser.add_argument("--out", help="also write the lines, after a provenance line, to this file")
    args = parser.parse_args()
    import jax  # noqa: F401 - before the stamp, so that it records the device (SBX runs on JAX too)

    emit = emitter(args.out)
    if args.sbx:
        sbx_td3(args.steps or 20_000, args.seeds, emit)
    else:
        ours(args.steps or 30_000, args.normalize_obs, args.seeds, emit)


if __name__ == "__main__":
    main()
