"""Our SAC against Brax's SAC (brax.training.agents.sac) on the same env, num_envs, batch, widths and UTD.

    python bench/sac_vs_brax.py                                  # both envs, num_envs 1, 16, 128
    python bench/sac_vs_brax.py --envs dmc/CartpoleSwingup --num-envs 16 --updates 3000
    python bench/sac_vs_brax.py --time-to-score 800              # wall time to an eval return, compile included
    python bench/sac_vs_brax.py --skip-brax --agents sac td3 ...  # our agents alone at SAC's settings
    python bench/sac_vs_brax.py --out bench/results/sac_vs_brax.jsonl   # also append the lines (with provenance)
    python bench/sac_vs_brax.py --table bench/results/sac_vs_brax.jsonl # the docs' table from such a file
    python bench/sac_vs_brax.py --updates-only --envs dmc/CartpoleSwingup   # one update against Brax's, alone

Prints one JSON line per (env, num_envs): steady-state training env steps/s of each (compile and
evaluation excluded, as Brax's training/sps), compile seconds, the ratio; for ours also the loop overhead (a
training chunk against the same env steps alone plus the same updates alone) and the update's achieved GFLOP/s
next to a dense matmul measured in the same run. With ``--out`` each line also carries ``provenance``
(``jaxrl.provenance.stamp``: the command, date, commit and environment block).
``--updates-only`` times one gradient update of each side alone, in one process, the programs alternating round
by round: our SAC's ``update``; the same with its actor loss reading the critics as they were before this update's
critic step (``make_update(actor_on_stepped_critics=False)``, Brax's order); and Brax's ``sgd_step`` (its alpha,
critic and actor updates and the target's Polyak step, built from ``brax.training.agents.sac``'s losses as its
``train`` builds them). Each program is a scan of ``--updates`` updates on fresh random batches of the env's sizes,
so neither side's replay buffer or env is in the figure; each line gives the median and best ms per update, the
FLOPs per update that XLA counts in each program, and the ratios.
Settings on both sides: batch 256, 2x256 ReLU networks, 1 gradient update per env step, gamma 0.99, lr 3e-4.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax

import envs
from agents import get_agent
from jaxrl import buffer as buffer_lib
from jaxrl.evaluate import evaluate
from jaxrl.loop import LoopConfig, compile_start, make_train

BATCH, HIDDEN = 256, (256, 256)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    return out, time.perf_counter() - t0


def ours(env_name: str, num_envs: int, updates: int, repeats: int = 2, agent_name: str = "sac",
         agent_overrides: dict | None = None) -> dict:
    """Our steady-state training env steps/s at 1 update per env step; networks 2x256 unless overridden."""
    chunk_steps = max(updates, 2 * num_envs)  # 1 update per env step: chunk env steps = updates
    cfg = LoopConfig(num_envs=num_envs, num_eval_envs=1, eval_every=chunk_steps, learning_starts=0,
                     buffer_size=max(100_000, 4 * chunk_steps))
    env = envs.make(env_name, num_envs)
    eval_env = dataclasses.replace(env, num_envs=1)  # as the CLI's make_envs: one model, traced once
    agent = get_agent(agent_name)
    fields = {f.name for f in dataclasses.fields(agent.Config)}
    widths = {k: HIDDEN for k in ("hidden_sizes", "actor_hidden_sizes", "critic_hidden_sizes") if k in fields}
    # TQC's and DSAC-T's own default networks differ from SAC's 2x256: the same widths make costs comparable.
    agent_cfg = agent.Config(**{"batch_size": BATCH, **widths, **(agent_overrides or {})})
    trainer = make_train(agent, env, eval_env, cfg, agent_cfg)
    t0 = time.perf_counter()
    initial_state, run_chunk = compile_start(trainer, [0], [agent_cfg])  # as the CLI compiles a fresh run
    state = initial_state()
    jax.block_until_ready(state)
    compile_s = time.perf_counter() - t0
    (state, _), _ = timed(run_chunk, state)  # first chunk: buffer nearly empty, warm caches
    times = []
    for _ in range(repeats):
        (state, _), dt = timed(run_chunk, state)
        times.append(dt)
    chunk_s = min(times)
    env_steps = trainer.schedule.chunk_env_steps
    parts = loop_overhead(agent, env, eval_env, agent_cfg, state, trainer, chunk_s)
    # Brax's training/sps excludes its evaluations: compare like with like (the chunk ends with one eval).
    train_s = chunk_s - parts["eval_s"]
    result = {"ours_env_steps_per_s": env_steps / train_s, "ours_env_steps_per_s_with_eval": env_steps / chunk_s,
              "ours_compile_s": compile_s}
    result.update(parts)
    return result


def loop_overhead(agent, env, eval_env, agent_cfg, train_state, trainer, chunk_s) -> dict:
    """Time the chunk's env steps alone (random actions + buffer writes), its updates alone and its evaluation."""
    one = jax.tree.map(lambda x: x[0], train_state.replace(env_steps=None, updates=None))
    schedule = trainer.schedule
    iters = schedule.block_iters * schedule.chunk_blocks
    n_updates = schedule.block_updates * schedule.chunk_blocks

    @jax.jit
    def env_only(env_state, buffer, key):
        def body(carry, key):
            env_state, buffer = carry
            action = jax.random.uniform(key, (env.num_envs, env.spec.action_size), minval=-1, maxval=1)
            new_state, out = env.step(env_state, action)
            buffer = buffer_lib.add(buffer, env_state.obs, action, out.reward, out.terminated, out.truncated,
                                    out.final_obs, env_state.episode_step)
            return (new_state, buffer), None

        return jax.lax.scan(body, (env_state, buffer), jax.random.split(key, iters))[0]

    @jax.jit
    def updates_only(agent_state, buffer, key):
        def body(agent_state, key):
            k1, k2 = jax.random.split(key)
            return agent.update(agent_state, agent.sample_batch(buffer, k1, agent_cfg), k2, agent_cfg)

        return jax.lax.scan(body, agent_state, jax.random.split(key, n_updates))

    @jax.jit
    def eval_only(agent_state, key):
        policy = lambda obs, carry, key: agent.act(agent_state, obs, key, agent_cfg, True, carry)  # noqa: E731
        return evaluate(eval_env, policy, key, 1, agent.init_carry(1, eval_env.spec, agent_cfg))

    key = jax.random.PRNGKey(1)
    timed(eval_only, one.agent, key)
    _, eval_s = timed(eval_only, one.agent, key)
    timed(env_only, one.env, one.buffer, key)
    _, env_s = timed(env_only, one.env, one.buffer, key)
    timed(updates_only, one.agent, one.buffer, key)
    _, upd_s = timed(updates_only, one.agent, one.buffer, key)

    # Achieved GFLOP/s of the update against a dense matmul measured now.
    batch = agent.sample_batch(one.buffer, key, agent_cfg)
    flops = jax.jit(agent.update, static_argnums=3).lower(one.agent, batch, key, agent_cfg).compile().cost_analysis()
    flops = (flops[0] if isinstance(flops, list) else flops).get("flops", float("nan"))
    a = jax.random.normal(key, (1024, 1024))
    mm = jax.jit(lambda a: a @ a)
    timed(mm, a)
    mm_s = min(timed(mm, a)[1] for _ in range(10))
    return {"loop_overhead": chunk_s / (env_s + upd_s + eval_s) - 1.0, "env_only_s": env_s, "updates_only_s": upd_s,
            "eval_s": eval_s,
            "chunk_s": chunk_s, "update_ms": upd_s / n_updates * 1e3, "update_gflop": flops / 1e9,
            "update_gflops_per_s": flops * n_updates / upd_s / 1e9,
            "dense_matmul_gflops_per_s": 2 * 1024**3 / mm_s / 1e9}


def matmul_chain_rate(rows: int, width: int, key, length: int = 2000) -> float:
    """GFLOP/s of a chain of [rows, width] x [width, width] matmuls (the size of the updates' hidden layers), each
    waiting for the one before, as a training step's layers do: the rate such matmuls get on this machine."""
    x = jax.random.normal(key, (rows, width))
    w = jax.random.normal(key, (width, width)) * (5 / 3) / width**0.5  # tanh's gain: the values stay O(1)
    chain = jax.jit(lambda x: jax.lax.scan(lambda x, _: (jax.numpy.tanh(x @ w), None), x, None, length=length)[0])
    timed(chain, x)
    best = min(timed(chain, x)[1] for _ in range(5))
    return 2 * rows * width * width * length / best / 1e9


def updates_only(env_name: str, updates: int, rounds: int) -> dict:
    """Median and best ms per gradient update of our SAC (as it is, and with Brax's order of the actor step) and of
    Brax's ``sgd_step``, alternating round by round in this process (see the module docstring)."""
    import optax
    from brax.training import gradients
    from brax.training.agents.sac import losses as brax_losses
    from brax.training.agents.sac import networks as sac_networks
    from brax.training.types import Transition

    from agents.sac import make_update
    from jaxrl.types import Batch

    spec = envs.make(env_name, 1).spec
    obs_size, action_size = spec.obs_size, spec.action_size
    sac = get_agent("sac")
    cfg = sac.Config(batch_size=BATCH, hidden_sizes=HIDDEN)
    key = jax.random.PRNGKey(0)

    def random_batch(key):
        k_obs, k_action, k_reward, k_next = jax.random.split(key, 4)
        return (jax.random.normal(k_obs, (BATCH, obs_size)),
                jax.random.uniform(k_action, (BATCH, action_size), minval=-1.0, maxval=1.0),
                jax.random.normal(k_reward, (BATCH,)), jax.random.normal(k_next, (BATCH, obs_size)))

    def ours_batch(key):
        obs, action, reward, next_obs = random_batch(key)
        zeros = jax.numpy.zeros((BATCH,))
        return Batch(obs=obs, action=action, reward=reward, next_obs=next_obs, terminated=zeros, truncated=zeros,
                     discount=jax.numpy.full((BATCH,), cfg.gamma))

    def brax_batch(key):
        obs, action, reward, next_obs = random_batch(key)
        return Transition(observation=obs, action=action, reward=reward, discount=jax.numpy.ones((BATCH,)),
                          next_observation=next_obs,
                          extras={"state_extras": {"truncation": jax.numpy.zeros((BATCH,))}, "policy_extras": {}})

    networks = sac_networks.make_sac_networks(obs_size, action_size, hidden_layer_sizes=HIDDEN)
    alpha_loss, critic_loss, actor_loss = brax_losses.make_losses(sac_network=networks, reward_scaling=1.0,
                                                                 discounting=0.99, action_size=action_size)
    adam = optax.adam(3e-4)
    alpha_update, critic_update, actor_update = (gradients.gradient_update_fn(loss, adam, pmap_axis_name=None)
                                                 for loss in (alpha_loss, critic_loss, actor_loss))

    def brax_step(state, transitions, key):
        """Brax's sgd_step (brax/training/agents/sac/train.py), without its normalizer and counters."""
        key_alpha, key_critic, key_actor = jax.random.split(key, 3)
        _, alpha_params, alpha_opt = alpha_update(state["alpha"], state["policy"], None, transitions, key_alpha,
                                                  optimizer_state=state["alpha_opt"])
        alpha = jax.numpy.exp(state["alpha"])
        _, q_params, q_opt = critic_update(state["q"], state["policy"], None, state["target_q"], alpha, transitions,
                                           key_critic, optimizer_state=state["q_opt"])
        _, policy_params, policy_opt = actor_update(state["policy"], None, state["q"], alpha, transitions, key_actor,
                                                    optimizer_state=state["policy_opt"])
        target_q = jax.tree.map(lambda x, y: x * (1 - 0.005) + y * 0.005, state["target_q"], q_params)  # Brax's tau
        return {"policy": policy_params, "q": q_params, "target_q": target_q, "alpha": alpha_params,
                "policy_opt": policy_opt, "q_opt": q_opt, "alpha_opt": alpha_opt}

    policy_params, q_params = networks.policy_network.init(key), networks.q_network.init(key)
    log_alpha = jax.numpy.zeros(())
    brax_state = {"policy": policy_params, "q": q_params, "target_q": q_params, "alpha": log_alpha,
                  "policy_opt": adam.init(policy_params), "q_opt": adam.init(q_params),
                  "alpha_opt": adam.init(log_alpha)}
    our_state = sac.init(key, spec, cfg)
    pre_step_update = make_update(actor_on_stepped_critics=False)
    sides = {"ours": (lambda s, b, k: sac.update(s, b, k, cfg)[0], ours_batch, our_state),
             "ours_pre_step_critics": (lambda s, b, k: pre_step_update(s, b, k, cfg)[0], ours_batch, our_state),
             "brax": (brax_step, brax_batch, brax_state)}

    def scanned(step, make_batch):
        def run(state, key):
            def body(state, key):
                batch_key, update_key = jax.random.split(key)
                return step(state, make_batch(batch_key), update_key), None

            return jax.lax.scan(body, state, jax.random.split(key, updates))[0]

        return jax.jit(run)

    programs, flops = {}, {}
    for name, (step, make_batch, state) in sides.items():
        programs[name] = scanned(step, make_batch).lower(state, key).compile()
        timed(programs[name], state, key)  # warm-up
        cost = jax.jit(step).lower(state, make_batch(key), key).compile().cost_analysis()
        flops[name] = (cost[0] if isinstance(cost, list) else cost).get("flops", float("nan"))
    times = {name: [] for name in sides}
    for _ in range(rounds):
        for name, (_, _, state) in sides.items():
            times[name].append(timed(programs[name], state, key)[1] / updates * 1e3)
    row = {"kind": "updates_only", "env": env_name, "obs_size": obs_size, "action_size": action_size,
           "updates": updates, "rounds": rounds, "device": jax.devices()[0].device_kind,
           "cores": len(os.sched_getaffinity(0))}  # `taskset -c 0`: 1
    for name in sides:
        ms = sorted(times[name])
        row.update({f"{name}_update_ms_median": ms[len(ms) // 2], f"{name}_update_ms_best": ms[0],
                    f"{name}_update_gflop": flops[name] / 1e9, f"{name}_update_ms_rounds": times[name]})
    row["brax_over_ours"] = row["brax_update_ms_median"] / row["ours_update_ms_median"]
    row["matmul_256_gflops_per_s"] = matmul_chain_rate(BATCH, HIDDEN[0], key)
    row["brax_over_ours_pre_step_critics"] = (row["brax_update_ms_median"]
                                              / row["ours_pre_step_critics_update_ms_median"])
    return row


def brax_environment(env_name: str) -> tuple[object, dict]:
    """(environment, extra kwargs) for Brax's ``train`` functions: a Brax env, or a Playground DMC task with
    Playground's wrapper for Brax training. Also patches the one JAX function Brax 0.14 still needs."""
    import jax._src.api as jax_api

    if not hasattr(jax, "device_put_replicated"):  # Brax 0.14 still calls it; JAX 0.10 removed it.
        jax.device_put_replicated = jax_api.device_put_replicated
    prefix, _, task = env_name.partition("/")
    if prefix == "dmc":
        from mujoco_playground import dm_control_suite, wrapper

        return (dm_control_suite.load(task, config_overrides={"impl": "jax"}),
                {"wrap_env_fn": wrapper.wrap_for_brax_training})
    from brax import envs as brax_envs

    return brax_envs.get_environment(task, backend="generalized"), {}


def brax_sac(env_name: str, num_envs: int, updates: int) -> dict:
    import functools

    from brax.training.agents.sac import networks as sac_networks
    from brax.training.agents.sac import train as brax_train

    environment, kwargs = brax_environment(env_name)
    epoch_steps = max(updates, num_envs)
    prefill = 2 * num_envs
    sps, walls = [], []
    t0 = time.perf_counter()

    def progress(step, metrics):
        walls.append(time.perf_counter() - t0)
        if "training/sps" in metrics:
            sps.append(float(metrics["training/sps"]))

    brax_train.train(
        environment=environment, num_timesteps=prefill + 3 * epoch_steps, episode_length=1000, num_envs=num_envs,
        num_eval_envs=1, learning_rate=3e-4, discounting=0.99, seed=0, batch_size=BATCH, num_evals=4,
        min_replay_size=prefill, max_replay_size=max(100_000, 4 * epoch_steps), grad_updates_per_step=num_envs,
        network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=HIDDEN),
        progress_fn=progress, **kwargs)
    wall = time.perf_counter() - t0
    steady = max(sps[1:]) if len(sps) > 1 else sps[-1]
    # Brax does not expose its compile time: count as fixed cost all wall time that steady-state training
    # of the same env steps does not explain (compiles of prefill/epoch/eval, evals, prefill).
    fixed = wall - 3 * epoch_steps / steady
    return {"brax_env_steps_per_s": steady, "brax_compile_s": fixed, "brax_wall_s": wall}


def time_to_score(env_name: str, score: float, num_envs: int, max_steps: int, extra: list[str]) -> dict:
    """Ours: wall time (compile included) until the deterministic eval return reaches ``score``."""
    import subprocess
    import tempfile

    run_dir = tempfile.mkdtemp(prefix="tts-")
    cmd = [sys.executable, "-m", "experiments.cli", "train", "--env", env_name, "--num-envs", str(num_envs),
           "--steps", str(max_steps), "--eval-every", "5000", "--run-dir", run_dir, "--compilation-cache", "None",
           *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    hit = next((r for r in rows if r["eval/return"] >= score), None)
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    return {"side": "ours", "env": env_name, "score": score, "num_envs": num_envs, "max_steps": max_steps,
            "command": " ".join(cmd[2:]),
            "env_steps_to_score": hit["env_steps"] if hit else None,
            # metrics' wall_s counts from before compilation: compile included, process start-up not
            "wall_s_to_score": hit["wall_s"] if hit else None, "compile_s": summary["compile_s"],
            "total_wall_s": time.perf_counter() - t0, "final_eval_return": summary["final_eval_return"]}


def brax_time_to_score(env_name: str, score: float, num_envs: int, max_steps: int, eval_every: int = 5000) -> dict:
    """Brax's SAC at the same settings as ``ours``: wall time (compile included) until its deterministic eval
    return (num_evals spaced every ``eval_every`` env steps) reaches ``score``."""
    import functools

    from brax.training.agents.sac import networks as sac_networks
    from brax.training.agents.sac import train as brax_train

    environment, kwargs = brax_environment(env_name)
    curve = []
    t0 = time.perf_counter()

    def progress(step, metrics):
        if "eval/episode_reward" in metrics:
            curve.append([int(step), float(metrics["eval/episode_reward"]), time.perf_counter() - t0])

    brax_train.train(
        environment=environment, num_timesteps=max_steps, episode_length=1000, num_envs=num_envs,
        num_eval_envs=10, deterministic_eval=True, learning_rate=3e-4, discounting=0.99, seed=0, batch_size=BATCH,
        num_evals=max_steps // eval_every + 1, min_replay_size=5000, max_replay_size=max_steps,
        grad_updates_per_step=num_envs,
        network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=HIDDEN),
        progress_fn=progress, **kwargs)
    hit = next((c for c in curve if c[1] >= score), None)
    return {"side": "brax", "env": env_name, "score": score, "num_envs": num_envs, "max_steps": max_steps,
            "env_steps_to_score": hit[0] if hit else None, "wall_s_to_score": hit[2] if hit else None,
            "total_wall_s": time.perf_counter() - t0, "final_eval_return": curve[-1][1], "eval_curve": curve}


def brax_table(rows: list[dict]) -> list[str]:
    lines = ["| env | num_envs | ours env steps/s | Brax's env steps/s | ratio | ours compile s | Brax's compile s | "
             "compile ratio | our update: ms, GFLOP/s (a 1024² matmul's) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['env']}` | {r['num_envs']} | {r['ours_env_steps_per_s']:.0f} | "
                     f"{r['brax_env_steps_per_s']:.0f} | {r['ratio']:.2f}x | {r['ours_compile_s']:.1f} | "
                     f"{r['brax_compile_s']:.1f} | {r['compile_ratio']:.2f}x | {r['update_ms']:.2f}, "
                     f"{r['update_gflops_per_s']:.0f} ({r['dense_matmul_gflops_per_s']:.0f}) |")
    return lines


def agents_table(rows: list[dict]) -> list[str]:
    lines = ["| agent | env | num_envs | env steps/s | update ms | GFLOP per update | compile s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['agent']} | `{r['env']}` | {r['num_envs']} | {r['ours_env_steps_per_s']:.1f} | "
                     f"{r['update_ms']:.2f} | {r['update_gflop']:.2f} | {r['ours_compile_s']:.1f} |")
    return lines


def score_table(rows: list[dict]) -> list[str]:
    lines = ["| side | env | num_envs | score | env steps to it | wall s to it (compile included) | "
             "final eval return |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        steps = "not reached" if r["env_steps_to_score"] is None else f"{r['env_steps_to_score']:,}"
        wall = "" if r["wall_s_to_score"] is None else f"{r['wall_s_to_score']:.0f}"
        lines.append(f"| {r.get('side', 'ours')} | `{r['env']}` | {r['num_envs']} | {r['score']:.0f} | {steps} | "
                     f"{wall} | {r['final_eval_return']:.0f} |")
    return lines


def updates_table(rows: list[dict]) -> list[str]:
    header = ["env", "device, cores", "rounds × updates", "ours ms (best)",
              "ours, actor on the pre-step critics, ms (best)", "Brax's ms (best)",
              "GFLOP per update: ours, pre-step, Brax's", "Brax's ms / ours", "Brax's ms / pre-step",
              "GFLOP/s: ours, Brax's (a chain of 256-row matmuls')"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        ms = {side: f"{r[side + '_update_ms_median']:.2f} ({r[side + '_update_ms_best']:.2f})"
              for side in ("ours", "ours_pre_step_critics", "brax")}
        gflop = ", ".join(f"{r[side + '_update_gflop']:.3f}" for side in ("ours", "ours_pre_step_critics", "brax"))
        rate = ", ".join(f"{r[side + '_update_gflop'] / r[side + '_update_ms_median'] * 1e3:.0f}"
                         for side in ("ours", "brax"))
        device = r.get("device") or r["provenance"]["environment"]["devices"]["kind"]  # lines before the field
        lines.append(f"| `{r['env']}` | {device}, {r['cores']} | {r['rounds']} × {r['updates']} | {ms['ours']} | "
                     f"{ms['ours_pre_step_critics']} | {ms['brax']} | {gflop} | {r['brax_over_ours']:.2f}x | "
                     f"{r['brax_over_ours_pre_step_critics']:.2f}x | {rate} ({r['matmul_256_gflops_per_s']:.0f}) |")
    return lines


def table(path: str) -> str:
    """The docs' tables of a results file, by the kind of lines it holds: SAC against Brax (lines with a
    ratio), our agents alone (``--skip-brax``), time to a score (``--time-to-score``) and one update alone
    (``--updates-only``)."""
    rows = [json.loads(line) for line in open(path)]
    updates = [r for r in rows if r.get("kind") == "updates_only"]
    rows = [r for r in rows if r.get("kind") != "updates_only"]
    kinds = [(brax_table, [r for r in rows if "ratio" in r]),
             (agents_table, [r for r in rows if "score" not in r and "ratio" not in r]),
             (score_table, [r for r in rows if "score" in r]), (updates_table, updates)]
    return "\n\n".join("\n".join(make(some)) for make, some in kinds if some)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["dmc/CartpoleSwingup", "brax/halfcheetah"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1, 16, 128])
    parser.add_argument("--updates", type=int, default=2048, help="gradient updates per timed chunk/epoch")
    parser.add_argument("--skip-brax", action="store_true")
    parser.add_argument("--agents", nargs="+", default=["sac"],
                        help="our agents to time; Brax's SAC is the peer of 'sac' only")
    parser.add_argument("--time-to-score", type=float, default=None)
    parser.add_argument("--max-steps", type=int, default=150_000)
    parser.add_argument("--out", default=None, help="also append the JSON lines (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' table of a results file")
    parser.add_argument("--updates-only", action="store_true",
                        help="time one update of each side alone (the module docstring); --updates per round")
    parser.add_argument("--rounds", type=int, default=7, help="--updates-only: rounds, the programs alternating")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags for jaxrl train (time-to-score)")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    stamp = None
    if args.out:
        from jaxrl import provenance

        stamp = provenance.stamp()

    def emit(row: dict) -> None:
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps({**row, "provenance": stamp}) + "\n")

    if args.updates_only:
        for env_name in args.envs:
            emit(updates_only(env_name, args.updates, args.rounds))
        return
    if args.time_to_score is not None:
        for env_name in args.envs:
            emit(time_to_score(env_name, args.time_to_score, args.num_envs[0], args.max_steps, args.extra))
            if not args.skip_brax:
                emit(brax_time_to_score(env_name, args.time_to_score, args.num_envs[0], args.max_steps))
        return
    for env_name, n, agent_name in itertools.product(args.envs, args.num_envs, args.agents):
        row = {"agent": agent_name, "env": env_name, "num_envs": n, "batch": BATCH, "hidden": list(HIDDEN),
               "updates_per_env_step": 1, "device": jax.devices()[0].device_kind}
        row.update(ours(env_name, n, args.updates, agent_name=agent_name))
        if agent_name == "sac" and not args.skip_brax:
            row.update(brax_sac(env_name, n, args.updates))
            row["ratio"] = row["ours_env_steps_per_s"] / row["brax_env_steps_per_s"]
            row["compile_ratio"] = row["ours_compile_s"] / row["brax_compile_s"]
        emit({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})

if __name__ == "__main__":
    main()
