"""Throughput of the massively parallel recipe: FastTD3 and FastSAC at 64, 256 and 1024 envs.

    python bench/massive.py                                   # CPU: reduced widths and batch (printed)
    python bench/massive.py --full                            # the official widths and batch (accelerators)
    python bench/massive.py --agents fasttd3 --envs dmc/CheetahRun --num-envs 1024 --iters 20
    python bench/massive.py --config fasttd3_playground --full --agents fasttd3 --envs locomotion/T1JoystickFlatTerrain

For each (agent, env, num_envs) the two halves of a batched step are jitted and timed on their own, from the
engine's own phases (``jaxrl.loop``): ``act_and_collect`` (policy actions for every env, one env step, the buffer
write) scanned over ``--iters`` batched steps, and ``learn`` (sample -> prepare -> update) for the recipe's updates
per batched step (FastTD3 2, FastSAC 8; 8 for FastTD3 on Go1, its per-task value). Prints one JSON line per
setting: env steps/s of collection alone, ms per update, updates/s, the collect / update split of a batched
step, and the env steps/s of the two together (collect + updates, what a training run's chunk does between
evaluations). Compile time (trace, lower and XLA compile of each function, ahead of time, the three XLA
compiles in parallel threads: ``compile_wall_s`` is their wall time) is reported apart and excluded from every rate.

``--config NAME`` takes everything from a named config as ``jaxrl train --config NAME --env ENV`` resolves it,
its ``[tasks."<env>"]`` tables included: the agent config (with ``--full``, exactly; without, at the reduced CPU
widths and batch), the updates per batched step (the config's ``updates_per_step`` x its ``num_envs``, kept per
batched step at other ``--num-envs``), observation normalisation and the env options (push and domain
randomisation); ``--num-envs`` defaults to the config's. The buffer stays small (what ``--iters`` fills, at least
two batches), as without ``--config``.

``python bench/massive.py --readme bench/results/massive_cpu.jsonl``
prints the docs' CPU figures from results files (a later file's row replaces an earlier one's setting) and runs
nothing; ``tests/test_figures.py`` checks the docs against it.

Several processes may run at once (bench/gpu_suite.sh): everything that runs on the device is done while holding
``bench/devtime.py: device_lock`` (``$JAXRL_BENCH_LOCK``), the compiles are not.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp

import envs
from agents import get_agent
from bench.devtime import compile_ahead, device_lock, emit
from jaxrl import ConfigError
from jaxrl import loop as loop_lib

# CPU: critics and actors at a quarter of the official widths and batch 1024 (the official 32768 / 8192 at 1024
# envs would take seconds per update on 2 cores).
REDUCED = {"fasttd3": dict(critic_hidden_sizes=(256, 128, 64), actor_hidden_sizes=(128, 64, 32), batch_size=1024),
           "fastsac": dict(critic_hidden_sizes=(192, 96, 48), actor_hidden_sizes=(128, 64, 32), batch_size=1024)}
UPDATES_PER_BATCHED_STEP = {"fasttd3": 2, "fastsac": 8}


def updates_per_batched_step(agent: str, env: str) -> int:
    return 8 if agent == "fasttd3" and env.startswith("locomotion/Go1") else UPDATES_PER_BATCHED_STEP[agent]


def timed(fn, state, repeats: int, advance=lambda state, out: out):
    """(output of one warm-up call, mean seconds of the next ``repeats`` calls); each call's input is
    ``advance(previous input, previous output)``."""
    out = jax.block_until_ready(fn(state))
    state = advance(state, out)
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = jax.block_until_ready(fn(state))
        state = advance(state, out)
    return out, (time.perf_counter() - t0) / repeats


def setup(agent_name: str, env_name: str, full: bool, config: str | None):
    """(agent, agent config, loop config, updates per batched step, env options, widths label)."""
    agent = get_agent(agent_name)
    if config is None:
        cfg = agent.Config() if full else agent.Config(**REDUCED[agent_name])
        updates = updates_per_batched_step(agent_name, env_name)
        loop = loop_lib.LoopConfig(warmup="policy", normalize_obs=True)
        return agent, cfg, loop, updates, {}, "official" if full else "reduced"
    from experiments import rundir

    resolved = rundir.resolve(config=config, env=env_name, tables={"run": {"env": env_name}})
    if resolved.agent.name != agent_name:
        raise ConfigError(f"config {config} is for agent {resolved.agent.name}, not {agent_name} (--agents)")
    loop, run = resolved.loop, resolved.run
    per_batched_step = loop.updates_per_step * loop.num_envs
    updates = round(per_batched_step)
    if updates < 1 or abs(per_batched_step - updates) > 1e-6:
        raise ConfigError(f"config {config}: {per_batched_step:g} updates per batched step of {loop.num_envs} envs; "
                          "this benchmark needs a whole number >= 1")
    env_options = dict(action_repeat=loop.action_repeat, episode_length=loop.episode_length,
                       brax_backend=run.brax_backend, playground_impl=run.playground_impl,
                       push_randomization=run.push_randomization, domain_randomization=run.domain_randomization)
    cfg = resolved.agent_cfg if full else dataclasses.replace(resolved.agent_cfg, **REDUCED[agent_name])
    return agent, cfg, loop, updates, env_options, f"config {config}" + ("" if full else ", reduced widths and batch")


def measure(agent_name: str, env_name: str, num_envs: int, iters: int, full: bool, config: str | None = None) -> dict:
    agent, cfg, base_loop, updates, env_options, widths = setup(agent_name, env_name, full, config)
    loop = dataclasses.replace(base_loop, num_envs=num_envs, num_eval_envs=1, updates_per_step=updates / num_envs,
                               buffer_size=max(num_envs * (iters + 2), cfg.batch_size * 2), learning_starts=0,
                               steps=10 * num_envs, eval_every=num_envs, pretrain_updates=0)
    eval_options = {k: v for k, v in env_options.items() if k != "domain_randomization"}
    program = loop_lib.describe(agent, envs.make(env_name, num_envs, **env_options), envs.make(env_name, 1,
                                **eval_options), loop, cfg)
    agent.check_config(cfg)
    keys = jnp.stack([jax.random.PRNGKey(0)])
    hparams = loop_lib.stack_configs([cfg], cfg)
    episodes = loop_lib.Episodes(jnp.zeros(1), jnp.zeros(1))

    def collect(state):
        keys = jax.random.split(state.key[0], iters + 1)
        (state, _), _ = jax.lax.scan(lambda c, k: loop_lib.act_and_collect(program, c, k[None]), (state, episodes),
                                     keys[1:])
        return state.replace(key=keys[:1])

    def learn(agent_state, hparams, buffer, normalizers, key):
        return loop_lib.learn(program, agent_state, hparams, buffer, normalizers, key, updates)

    def first(tree):  # one seed's leaves; counters stay scalars
        return jax.tree.map(lambda x: x[0] if x.ndim else x, tree)

    state_shape = jax.eval_shape(program.initial_state, keys, hparams)
    one_shape = jax.eval_shape(first, state_shape)
    t0 = time.perf_counter()
    (init_c, init_compile), (collect_c, collect_compile), (learn_c, learn_compile) = compile_ahead(
        (program.initial_state, (keys, hparams)), (collect, (state_shape,)),
        (learn, (one_shape.agent, one_shape.hparams, one_shape.buffer, one_shape.normalizers, one_shape.key)))
    compile_wall = time.perf_counter() - t0
    with device_lock() as waited:
        state = jax.block_until_ready(init_c(keys, hparams))
        state, collect_s = timed(collect_c, state, repeats=2)
        one = first(state)
        args = (one.agent, one.hparams, one.buffer, one.normalizers)

        def learn_call(key_and_agent):
            key, agent_state = key_and_agent
            return learn_c(agent_state, *args[1:], key)

        def advance(key_and_agent, out):
            return jax.random.split(key_and_agent[0])[0], out[0]

        _, learn_s = timed(learn_call, (one.key, one.agent), repeats=3, advance=advance)
    step_collect_s = collect_s / iters
    iteration_s = step_collect_s + learn_s
    return {"bench": "massive", "config": config, "agent": agent_name, "env": env_name, "num_envs": num_envs,
            "device": jax.devices()[0].platform, "device_kind": jax.devices()[0].device_kind, "widths": widths,
            "batch_size": cfg.batch_size,
            "critic_hidden_sizes": list(cfg.critic_hidden_sizes), "actor_hidden_sizes": list(cfg.actor_hidden_sizes),
            "updates_per_batched_step": updates, "iters": iters,
            "push_randomization": env_options.get("push_randomization"),
            "collect_env_steps_per_s": round(num_envs / step_collect_s, 1),
            "ms_per_update": round(1000 * learn_s / updates, 2), "updates_per_s": round(updates / learn_s, 1),
            "collect_share": round(step_collect_s / iteration_s, 3),
            "train_env_steps_per_s": round(num_envs / iteration_s, 1),
            "compile_s": {"init": round(sum(init_compile), 1), "collect": round(sum(collect_compile), 1),
                          "learn": round(sum(learn_compile), 1)},
            "compile_parts_s": {"init": init_compile, "collect": collect_compile, "learn": learn_compile},
            "compile_wall_s": round(compile_wall, 1),
            "lock_wait_s": round(waited, 1)}


NAMES = {"fasttd3": "FastTD3", "fastsac": "FastSAC"}


def readme(paths: list[str]) -> str:
    """Per env and agent: train env steps/s at each num_envs, then ms per update in brackets."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                rows[(r["env"], r["agent"], r["num_envs"])] = r
    envs_seen = list(dict.fromkeys(env for env, _, _ in rows))
    parts = []
    for env in envs_seen:
        agents = [a for a in dict.fromkeys(a for e, a, _ in rows if e == env)]
        cells = []
        for i, agent in enumerate(agents):
            settings = sorted(n for e, a, n in rows if (e, a) == (env, agent))
            rates = " / ".join(f"{rows[env, agent, n]['train_env_steps_per_s']:.0f}" for n in settings)
            ms = " / ".join(f"{rows[env, agent, n]['ms_per_update']:.0f}" for n in settings)
            cells.append(f"{NAMES.get(agent, agent)}{f' `{env}`' if i == 0 else ''} {rates} ({ms} ms)")
        parts.append(", ".join(cells))
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=["fasttd3", "fastsac"])
    parser.add_argument("--envs", nargs="+", default=["dmc/CheetahRun", "locomotion/Go1JoystickFlatTerrain"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=None,
                        help="default: 64 256 1024; with --config, the config's num_envs")
    parser.add_argument("--iters", type=int, default=4, help="batched env steps per timed collection")
    parser.add_argument("--full", action="store_true", help="the official widths and batch size")
    parser.add_argument("--config", default=None, help="a named config (or .toml path): its agent config, updates "
                        "per batched step, loop and env options for each env, [tasks] tables included")
    parser.add_argument("--out", default=None, help="also append the JSON lines to this file")
    parser.add_argument("--readme", nargs="+", metavar="JSONL", help="print the docs' figures from these files")
    args = parser.parse_args()
    if args.readme:
        print(readme(args.readme))
        return
    for env_name in args.envs:
        for agent_name in args.agents:
            num_envs_list = args.num_envs
            if num_envs_list is None:
                num_envs_list = [64, 256, 1024] if args.config is None else [
                    setup(agent_name, env_name, True, args.config)[2].num_envs]
            for num_envs in num_envs_list:
                emit(measure(agent_name, env_name, num_envs, args.iters, args.full, args.config), args.out)


if __name__ == "__main__":
    main()
