"""Our TD3 / TQC / SAC against SBX (Stable-Baselines-Jax) the way people run it: one Gymnasium env, 1 update
per env step, SBX's Python training loop around its jitted updates.

    pip install torch==2.13.0 -e '.[bench]'    # torch: SB3 (SBX's base) imports it; 2.13.0 is the local CPU file
    python bench/vs_sbx.py                               # td3 and tqc on Pendulum and HalfCheetah
    python bench/vs_sbx.py --agents tqc --envs pendulum --steps 3000
    python bench/vs_sbx.py --out bench/results/vs_sbx.jsonl     # also append the lines (with provenance)
    python bench/vs_sbx.py --table bench/results/vs_sbx.jsonl   # the docs' table from such a file

Pairs (same dynamics where possible): ``toy/Pendulum`` vs Gymnasium ``Pendulum-v1`` (identical equations);
``brax/halfcheetah`` vs Gymnasium ``HalfCheetah-v5`` (MuJoCo C): the simulators differ there, the tasks match.
Ours runs num_envs 1 too, so the comparison is the loop around the same work. Networks on both sides are SBX's
defaults (2x256; TQC 2 critics x 25 quantiles, 2 dropped per critic; SBX's TQC cannot build more critics).
Batch 256, gamma 0.99, 1 gradient step per env step. Prints one JSON line per pair:
steady-state training env steps/s of each (compile and warm-up excluded), and ours / SBX.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax
from devtime import emit
from sac_vs_brax import ours

ENVS = {"pendulum": ("toy/Pendulum", "Pendulum-v1"), "halfcheetah": ("brax/halfcheetah", "HalfCheetah-v5")}

# name -> (our agent, our Config overrides, SBX class name, SBX policy_kwargs)
SETTINGS = {
    "td3": ("td3", {}, "TD3", {"net_arch": [256, 256]}),
    "sac": ("sac", {}, "SAC", {"net_arch": [256, 256]}),
    "tqc": ("tqc", {"num_critics": 2, "drop_per_critic": 2}, "TQC", {"net_arch": [256, 256], "n_critics": 2}),
}
# No row for TQC's official 5 critics of 3x512: SBX's TQC always builds two critics (qf1, qf2) and uses
# n_critics only to count the atoms it keeps, so it cannot run the official setting.


def sbx_steps_per_s(algo: str, env_id: str, policy_kwargs: dict, steps: int, warmup: int) -> dict:
    import gymnasium as gym
    import numpy as np
    import sbx
    from stable_baselines3.common.noise import NormalActionNoise

    env = gym.make(env_id)
    extra = {}
    if algo == "TD3":  # SBX's TD3 explores without noise unless given some; ours adds N(0, 0.1)
        size = env.action_space.shape[0]
        extra["action_noise"] = NormalActionNoise(np.zeros(size), 0.1 * np.ones(size))
    model = getattr(sbx, algo)("MlpPolicy", env, batch_size=256, learning_starts=warmup, train_freq=1,
                               gradient_steps=1, policy_kwargs=dict(policy_kwargs), seed=0, verbose=0, **extra)
    t0 = time.perf_counter()
    model.learn(total_timesteps=warmup + 200)  # compiles the update and the action selection
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=False)
    return {"sbx_env_steps_per_s": steps / (time.perf_counter() - t0), "sbx_warmup_and_compile_s": warm_s}


def table(path: str) -> str:
    """The docs' table of a results file: one row per (setting, env pair)."""
    lines = ["| agent | ours (env) | SBX (env) | ours env steps/s | SBX env steps/s | ours / SBX |",
             "|---|---|---|---|---|---|"]
    for line in open(path):
        r = json.loads(line)
        lines.append(f"| {r['setting']} | `{r['ours_env']}` | `{r['sbx_env']}` (sbx-rl {r.get('sbx_version', '?')}) | "
                     f"{r['ours_env_steps_per_s']:.0f} | {r['sbx_env_steps_per_s']:.0f} | {r['ratio']:.2f}x |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=["td3", "tqc"], choices=sorted(SETTINGS))
    parser.add_argument("--envs", nargs="+", default=["pendulum", "halfcheetah"], choices=sorted(ENVS))
    parser.add_argument("--steps", type=int, default=2000, help="timed env steps (= gradient updates) per side")
    parser.add_argument("--out", default=None, help="also append the JSON lines (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' table of a results file")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    from importlib import metadata
    for name in args.agents:
        agent_name, overrides, algo, policy_kwargs = SETTINGS[name]
        for env_key in args.envs:
            our_env, gym_env = ENVS[env_key]
            row = {"setting": name, "ours_env": our_env, "sbx_env": gym_env, "num_envs": 1, "batch": 256,
                   "updates_per_env_step": 1, "sbx_policy_kwargs": policy_kwargs,
                   "device": jax.devices()[0].device_kind, "sbx_version": metadata.version("sbx-rl"),
                   "torch_version": metadata.version("torch"), "mujoco_version": metadata.version("mujoco")}
            mine = ours(our_env, 1, args.steps, agent_name=agent_name, agent_overrides=overrides)
            row.update({k: mine[k] for k in ("ours_env_steps_per_s", "ours_compile_s")})
            row.update(sbx_steps_per_s(algo, gym_env, policy_kwargs, args.steps, warmup=1000))
            row["ratio"] = row["ours_env_steps_per_s"] / row["sbx_env_steps_per_s"]
            emit({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}, args.out)


if __name__ == "__main__":
    main()
