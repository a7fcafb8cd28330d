"""Plug-ins: training progress reaches every agent function, and a `module:ATTR` run is a run like any other."""
import json
import math
import os
import signal
import subprocess
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents import agent_spec, get_agent, sac
from jaxrl import progress as progress_lib
from jaxrl.loop import LoopConfig
from tests.helpers import (
    BATCH,
    KEY,
    TINY_TABLES,
    FixedActor,
    assert_one_line_error,
    doc_block,
    doc_python_block,
    sampled,
    saved_state,
    train,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def progress_critic_loss(critic_params, state, batch, key, cfg):
    loss, aux = sac.critic_loss(critic_params, state, batch, key, cfg)
    p = state.progress
    return loss, {**aux, "seen_updates": p.updates.astype(jnp.float32), "seen_env_steps": p.env_steps.astype(
        jnp.float32), "seen_fraction": p.fraction, "seen_planned": p.planned_updates.astype(jnp.float32)}


def progress_act(state, obs, key, cfg, deterministic=False, carry=()):
    """The action is the fraction of the run's env steps at acting time, mapped onto [-1, 1] (readable in the
    buffer)."""
    return jnp.full(obs.shape[:-1] + (1,), 2.0 * state.progress.fraction - 1.0), carry


PROGRESS_AGENT = sac.AGENT._replace(name="progress_probe", act=progress_act,
                                    update=sac.make_update(critic_loss_fn=progress_critic_loss))


def test_progress_reaches_act_and_every_update_exactly_in_every_member():
    """2 envs, 2 updates per transition (4 per block), learning from env step 100, 400 env steps in two chunks:
    block b (from 1) ends at 2b env steps and learns from b = 50, so the run does 151 x 4 = 604 updates. A loss sees
    the index of its own update, the env steps collected and the planned totals; act sees the env steps before its
    step. Both seeds of the vmapped program see the same progress; the saved state holds none of it."""
    loop = LoopConfig(steps=400, num_envs=2, num_eval_envs=2, eval_every=200, learning_starts=100,
                      updates_per_step=2.0, buffer_size=1000, warmup="policy")
    state, history = train("toy/Pendulum", loop, sac.Config(hidden_sizes=(8,), batch_size=8), seeds=2,
                           agent=PROGRESS_AGENT)
    assert int(state.updates) == 604 and int(state.env_steps) == 400
    first, second = history
    # Chunk 1 learns in blocks 50..100, chunk 2 in 101..200; block b's updates are 4(b - 50) + 0..3.
    for metrics, blocks in ((first, range(50, 101)), (second, range(101, 201))):
        expected_updates = np.mean([4 * (b - 50) + 1.5 for b in blocks])
        np.testing.assert_allclose(metrics["train/seen_updates"], [expected_updates] * 2, rtol=1e-6)
        np.testing.assert_allclose(metrics["train/seen_env_steps"], [np.mean([2 * b for b in blocks])] * 2, rtol=1e-6)
        np.testing.assert_allclose(metrics["train/seen_fraction"], [np.mean([2 * b / 400 for b in blocks])] * 2,
                                   rtol=1e-6)
        np.testing.assert_allclose(metrics["train/seen_planned"], [604.0] * 2)
    # Row r of the buffer holds the action taken after 2r env steps: 2 (2r / 400) - 1.
    actions = np.asarray(state.buffer.action)[:, :200, :, 0]  # [seeds, rows, envs]
    expected = 2 * (2 * np.arange(200) / 400) - 1
    np.testing.assert_allclose(actions, np.broadcast_to(expected[None, :, None], actions.shape), atol=1e-6)
    assert state.agent.progress is None


def brute_force_totals(steps, num_envs, updates_per_step, eval_every, first_update, pretrain):
    """The loop's counters, stepped block by block in Python."""
    per_iter = updates_per_step * num_envs
    block_iters, block_updates = (1, round(per_iter)) if per_iter >= 1 else (round(1 / per_iter), 1)
    block_env_steps = num_envs * block_iters
    chunk_blocks = max(1, -(-min(eval_every, steps) // block_env_steps))
    env_steps = updates = 0
    for _ in range(math.ceil(steps / (chunk_blocks * block_env_steps)) * chunk_blocks):
        env_steps += block_env_steps
        if env_steps >= first_update:
            updates += block_updates + (pretrain if updates == 0 else 0)
    return updates, env_steps, (chunk_blocks, block_env_steps, block_updates)


@pytest.mark.parametrize("steps,num_envs,updates_per_step,eval_every,first_update,pretrain", [
    (400, 2, 2.0, 200, 100, 0), (1000, 4, 0.25, 300, 50, 0), (1000, 4, 0.25, 300, 51, 7), (90, 3, 1.0, 1000, 6, 0),
    (5000, 16, 1 / 16, 1000, 5000, 0), (5000, 16, 1 / 16, 1000, 4999, 3)])
def test_planned_totals_count_what_the_loop_does(steps, num_envs, updates_per_step, eval_every, first_update,
                                                 pretrain):
    updates, env_steps, (chunk_blocks, block_env_steps, block_updates) = brute_force_totals(
        steps, num_envs, updates_per_step, eval_every, first_update, pretrain)
    total_blocks = env_steps // block_env_steps
    assert progress_lib.planned_totals(total_blocks, block_env_steps, block_updates, first_update, pretrain) == (
        updates, env_steps)


def test_interpolate_is_linear_then_constant():
    p = progress_lib.at(updates=50, env_steps=300, planned_updates=100, planned_env_steps=1000)
    assert float(p.fraction) == pytest.approx(0.3) and float(p.update_fraction) == pytest.approx(0.5)
    assert float(p.interpolate(1.0, 0.0)) == pytest.approx(0.7)
    assert float(p.interpolate(1.0, 0.0, over=0.6)) == pytest.approx(0.5)
    assert float(p.interpolate(1.0, 0.0, over=0.2)) == pytest.approx(0.0)  # done after 20 % of the run
    assert float(p.interpolate(0.0, 2.0, over=1.0, by="updates")) == pytest.approx(1.0)
    assert float(jax.jit(lambda q: q.interpolate(1.0, 0.0))(p)) == pytest.approx(0.7)  # traced, no recompiling


# ------------------------------------------------------------------------------------ plug-ins are runs

PLUGIN = '''from agents import sac

AGENT = sac.AGENT._replace(name="my.sac:v2")  # a name with characters no flag or identifier may have
'''


def jaxrl_in(cwd, *args):
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def test_a_plugin_run_records_its_import_path_and_resumes_like_a_built_in(tmp_path):
    (tmp_path / "mysac.py").write_text(PLUGIN)
    tiny = ["--env", "toy/Pendulum", "--steps", "200", "--num-envs", "2", "--num-eval-envs", "1",
            "--learning-starts", "100", "--my-sac-v2.batch-size", "8", "--my-sac-v2.hidden-sizes", "8"]
    first = jaxrl_in(tmp_path, "train", "--agent", "mysac:AGENT", *tiny, "--my-sac-v2.actor-lr", "1e-3",
                     "--run-dir", "runs/p")
    assert first.returncode == 0, first.stderr
    saved = json.load(open(tmp_path / "runs" / "p" / "config.json"))
    assert saved["agent"] == "mysac:AGENT" and saved["agent_config"]["actor_lr"] == 1e-3
    resumed = jaxrl_in(tmp_path, "train", "--resume", "runs/p", "--steps", "400")
    assert resumed.returncode == 0, resumed.stderr
    assert json.load(open(tmp_path / "runs" / "p" / "summary.json"))["env_steps"] == 400
    # From a directory where the module cannot be found: one line naming it and where it was looked up.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert_one_line_error(jaxrl_in(elsewhere, "train", "--resume", "../runs/p", "--steps", "600"),
                          "cannot import module 'mysac' of agent 'mysac:AGENT'", f"PYTHONPATH={REPO}")
    # A plug-in run saved before runs recorded import paths holds the agent's name; --agent gives the path.
    saved = json.load(open(tmp_path / "runs" / "p" / "config.json"))
    json.dump({**saved, "agent": "my.sac:v2"}, open(tmp_path / "runs" / "p" / "config.json", "w"))
    assert_one_line_error(jaxrl_in(tmp_path, "train", "--resume", "runs/p", "--steps", "600"),
                          "cannot import module 'my.sac'", "resume it with --agent module:ATTRIBUTE")
    old = jaxrl_in(tmp_path, "train", "--resume", "runs/p", "--agent", "mysac:AGENT", "--steps", "600")
    assert old.returncode == 0, old.stderr
    assert json.load(open(tmp_path / "runs" / "p" / "config.json"))["agent"] == "mysac:AGENT"


ANNEALED = '''from agents import sac


def annealed_target(state, batch, key, cfg):
    """The soft TD target scaled from half to whole over the first half of the run: it reads the engine's progress,
    so a resume that lost the update count would change every later update."""
    return sac.soft_td_target(state, batch, key, cfg) * state.progress.interpolate(0.5, 1.0, over=0.5)


AGENT = sac.AGENT._replace(name="annealed", update=sac.make_update(target_fn=annealed_target))
'''

PLUGIN_SWEEP = """agent = "annealed:AGENT"
envs = ["toy/Pendulum"]
seeds = 2
[run]
checkpoint_every = 400
compilation_cache = "~/.cache/jaxrl/xla-tests"
""" + TINY_TABLES.replace("steps = 400", "steps = 1200") + """[grid]
actor_lr = [3e-4, 1e-3]
"""


@pytest.mark.slow
def test_a_plugin_sweep_killed_and_continued_ends_bitwise_equal_to_an_uninterrupted_one(tmp_path):
    """A sweep of a plug-in in the user's working directory, SIGKILLed after its first checkpoint and run again,
    ends with the state of the sweep that was never interrupted; a member exported from it is a run (config, ONNX
    graph, resume) of the plug-in."""
    (tmp_path / "annealed.py").write_text(ANNEALED)
    (tmp_path / "sweep.toml").write_text(PLUGIN_SWEEP)
    whole = jaxrl_in(tmp_path, "sweep", "sweep.toml", "--out", "whole")
    assert whole.returncode == 0, whole.stderr
    (group,) = os.listdir(tmp_path / "whole" / "groups")

    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "sweep", "sweep.toml", "--out", "killed"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    killed = tmp_path / "killed" / "groups" / group  # the program's name depends only on its members
    deadline = time.time() + 300
    while time.time() < deadline and not (killed / "checkpoints" / "400" / "jaxrl_manifest.json").exists():
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "summary.json").exists(), "the sweep finished before it was killed"

    again = jaxrl_in(tmp_path, "sweep", "sweep.toml", "--out", "killed")
    assert again.returncode == 0, again.stderr
    summary = json.load(open(killed / "summary.json"))
    assert summary["resumed_from"] >= 400 and summary["env_steps"] == 1200
    a, b = saved_state(tmp_path / "whole" / "groups" / group, 1200), saved_state(killed, 1200)
    assert a.keys() == b.keys() and any(k.startswith(".agent.") and "params" in k for k in a)
    for key in a:  # four members' parameters, optimizer states, buffers, env states, RNG: bitwise on CPU
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    rows = [json.loads(line) for line in open(killed / "metrics.jsonl")]
    assert [r["env_steps"] for r in rows] == list(range(200, 1201, 200))  # no chunk lost or repeated

    exported = jaxrl_in(tmp_path, "export", f"killed/groups/{group}", "--member", "1", "--out", "m1")
    assert exported.returncode == 0, exported.stderr
    assert json.load(open(tmp_path / "m1" / "config.json"))["agent"] == "annealed:AGENT"
    onnx = jaxrl_in(tmp_path, "export", "m1", "--onnx", "m1.onnx")
    assert onnx.returncode == 0 and os.path.getsize(tmp_path / "m1.onnx") > 0, onnx.stderr
    longer = jaxrl_in(tmp_path, "train", "--resume", "m1", "--steps", "1600")
    assert longer.returncode == 0, longer.stderr
    assert json.load(open(tmp_path / "m1" / "summary.json"))["env_steps"] == 1600


@pytest.mark.slow
def test_the_readmes_plugin_run_lines_run_verbatim_from_a_working_directory(tmp_path):
    lines = doc_block("docs/plugins/index.md", "A plug-in run is a run: `tests/test_plugins.py` runs these lines")
    assert [line.split()[1] for line in lines] == ["train", "train", "export"]
    for line in lines:
        result = jaxrl_in(tmp_path, *line.split()[1:])
        assert result.returncode == 0 and "Traceback" not in result.stderr, f"{line}\n{result.stderr}"
    summary = json.load(open(tmp_path / "runs" / "redq" / "summary.json"))
    assert summary["agent"] == "redq" and summary["resumed_from"] == 500 and summary["env_steps"] == 1000
    assert json.load(open(tmp_path / "runs" / "redq" / "config.json"))["agent"] == "experiments.examples.redq:AGENT"
    assert os.path.getsize(tmp_path / "runs" / "redq" / "policy.onnx") > 0


def test_agent_spec_inverts_get_agent():
    for name in ("sac", "td3"):
        assert agent_spec(get_agent(name)) == name
    huber = get_agent("experiments.examples.sac_huber:AGENT")
    assert agent_spec(huber) == "experiments.examples.sac_huber:AGENT"
    assert agent_spec(sac.AGENT._replace(name="nowhere")) is None  # held by no module: only its name is recorded
    assert agent_spec(PROGRESS_AGENT) == "tests.test_plugins:PROGRESS_AGENT"


# ---------------------------------------------------------------------------------- REDQ, the worked example

class FourLinearCritics(nn.Module):
    """Q_j(s, a) = w_j s + v_j a for four critics, output [4, B, 1]."""

    @nn.compact
    def __call__(self, obs, action):
        w = self.param("w", lambda k: jnp.array([1.0, 2.0, -1.0, 0.5]))
        v = self.param("v", lambda k: jnp.array([0.5, -1.0, 2.0, 0.0]))
        return (w[:, None] * obs[None, :, 0] + v[:, None] * action[None, :, 0])[..., None]


def redq_state():
    actor, critic = FixedActor(), FourLinearCritics()
    actor_params, critic_params = actor.init(KEY, BATCH.obs), critic.init(KEY, BATCH.obs, BATCH.action)
    opt = optax.adam(1e-3)
    log_alpha = jnp.log(jnp.float32(0.5))
    return sac.State(actor_params=actor_params, critic_params=critic_params, target_critic_params=critic_params,
                     log_alpha=log_alpha, target_entropy=jnp.float32(-1.0), actor_opt_state=opt.init(actor_params),
                     critic_opt_state=opt.init(critic_params), alpha_opt_state=opt.init(log_alpha), actor=actor,
                     critic=critic)


def four_q(s, a):
    return np.stack([1.0 * s + 0.5 * a, 2.0 * s - 1.0 * a, -1.0 * s + 2.0 * a, 0.5 * s + 0.0 * a])


def test_redq_target_is_the_minimum_over_a_random_pair_of_target_critics_by_hand():
    from experiments.examples import redq

    cfg = redq.Config(num_critics=4, num_target_critics=2, gamma=0.9, init_alpha=0.5)
    state, s2 = redq_state(), np.array([3.0, -1.0])
    pairs = set()
    for seed in range(40):
        key = jax.random.PRNGKey(seed)
        action_key, subset_key = jax.random.split(key)
        subset = sorted(np.asarray(jax.random.choice(subset_key, 4, (2,), replace=False)).tolist())
        pairs.add(tuple(subset))
        a2, logp2 = sampled(action_key, 2, epsilon=1e-6)  # the official log-density's 1e-6
        next_v = four_q(s2, a2)[subset].min(0) - 0.5 * logp2
        expected = np.array([1.0 + 0.9 * next_v[0], -1.0])  # transition 0 truncated: bootstraps; 1 terminated
        np.testing.assert_allclose(redq.redq_target(state, BATCH, key, cfg), expected, rtol=1e-5)
    assert len(pairs) == 6  # every pair of the four critics is drawn


def test_redq_actor_loss_is_on_the_mean_over_all_critics_by_hand():
    from experiments.examples import redq

    cfg = redq.Config(num_critics=4, init_alpha=0.5)
    state = redq_state()
    loss, info = redq.mean_q_actor_loss(state.actor_params, state, BATCH, KEY, cfg)
    a, logp = sampled(KEY, 2, epsilon=1e-6)
    np.testing.assert_allclose(loss, np.mean(0.5 * logp - four_q(np.array([1.0, 2.0]), a).mean(0)), rtol=1e-5)
    np.testing.assert_allclose(info["log_prob"], logp, rtol=1e-5)


def test_redq_updates_the_actor_and_temperature_once_per_twenty_critic_updates():
    """policy_delay = 20: over 40 updates the actor moves at updates 20 and 40 only, the critics and targets every
    time; the updates in between repeat the last actor metrics."""
    from experiments.examples import redq
    from jaxrl.types import EnvSpec

    cfg = redq.Config(hidden_sizes=(8,), batch_size=2, num_critics=3)
    state = redq.AGENT.init(KEY, EnvSpec(obs_size=1, action_size=1, decisions_per_episode=10), cfg)
    update = jax.jit(redq.AGENT.update)
    moved, metrics = [], []
    for k in range(40):
        new, m = update(state, BATCH, jax.random.PRNGKey(k), cfg)
        moved.append(not np.array_equal(jax.tree.leaves(new.actor_params)[0], jax.tree.leaves(state.actor_params)[0]))
        assert not np.array_equal(jax.tree.leaves(new.critic_params)[0], jax.tree.leaves(state.critic_params)[0])
        metrics.append(float(m["actor_loss"]))
        state = new
    assert [k + 1 for k, m in enumerate(moved) if m] == [20, 40]
    assert metrics[:19] == [0.0] * 19 and len(set(metrics[19:39])) == 1 and metrics[39] != metrics[38]


def test_redq_follows_its_official_code_temperature_form_density_epsilon_and_critic_order():
    """One update (actor every update): the actor's loss reads the critics as they were before this update's critic
    step, its log-density has 1e-6 inside log(1 - tanh^2 + 1e-6), and the temperature's loss is the log-alpha form
    -log alpha * mean(log pi + target entropy) (watchernyu/REDQ redq_sac.py, core.py)."""
    from experiments.examples import redq

    cfg = redq.Config(num_critics=4, init_alpha=0.5, policy_delay=1, critic_lr=0.5)  # a large critic step
    state = redq_state()
    new, metrics = jax.jit(redq.AGENT.update)(state, BATCH, KEY, cfg)
    assert not np.allclose(new.critic_params["params"]["w"], state.critic_params["params"]["w"])
    a, logp = sampled(jax.random.split(KEY)[1], 2, epsilon=1e-6)
    q_before_step = four_q(np.array([1.0, 2.0]), a).mean(0)
    np.testing.assert_allclose(metrics["actor_loss"], np.mean(0.5 * logp - q_before_step), rtol=1e-5)
    np.testing.assert_allclose(metrics["alpha_loss"], -np.log(0.5) * np.mean(logp - 1.0), rtol=1e-5)
    # The density's epsilon where the action saturates (|u| = 10): log(1 - tanh^2 + 1e-6) stops at log(1e-6).
    from jaxrl.networks import sample_tanh_gaussian

    _, saturated = sample_tanh_gaussian(KEY, jnp.array([10.0]), jnp.array([-1.0]), cfg.log_prob_epsilon)
    u = 10.0 + np.exp(-1.0) * float(jax.random.normal(KEY, (1,))[0])
    np.testing.assert_allclose(saturated, -0.5 * ((u - 10.0) / np.exp(-1.0)) ** 2 + 1.0 - 0.5 * np.log(2 * np.pi)
                               - np.log(1 - np.tanh(u) ** 2 + 1e-6), rtol=1e-3)  # the exact density: 4.8 nats more


def test_redq_clips_its_policys_log_std_to_minus_twenty_and_two():
    """The code's LOG_SIG_MIN/MAX clip (SAC squashes smoothly into [-5, 2]): a raw log std of -30 reads -20."""
    from experiments.examples import redq
    from jaxrl.types import EnvSpec

    cfg = redq.Config(hidden_sizes=(8,))
    state = redq.AGENT.init(KEY, EnvSpec(obs_size=1, action_size=1, decisions_per_episode=10), cfg)
    params = jax.tree.map(lambda x: jnp.zeros_like(x) if x.shape != (2,) else jnp.array([0.0, -30.0]),
                          state.actor_params)
    _, log_std = state.actor.apply(params, jnp.ones((1, 1)))
    assert float(log_std[0, 0]) == -20.0
    params = jax.tree.map(lambda x: jnp.zeros_like(x) if x.shape != (2,) else jnp.array([0.0, 30.0]), params)
    assert float(state.actor.apply(params, jnp.ones((1, 1)))[1][0, 0]) == 2.0


def test_redq_mbpo_config_sets_the_official_per_task_target_entropy():
    """redq_mbpo: MBPO's table (REDQ core.py mbpo_target_entropy_dict) for Brax's versions of its five tasks."""
    from experiments import rundir

    table = {"brax/hopper": -1.0, "brax/halfcheetah": -3.0, "brax/walker2d": -3.0, "brax/ant": -4.0,
             "brax/humanoid": -2.0}
    for env, entropy in table.items():
        resolved = rundir.resolve(None, config="redq_mbpo", env=env)
        assert resolved.agent.name == "redq" and resolved.agent_cfg.target_entropy == entropy
        assert resolved.loop.updates_per_step == 20 and resolved.loop.num_envs == 1


# ------------------------------------------------------------------------- the plug-in guide's examples (docs)


def test_the_readmes_hook_table_builds_agents_that_update():
    """Every plug-in of the hook table (docs/plugins/index.md): one jitted update with progress set (in the middle of
    a run), an exploring action, and the replay sampling hook on a filled buffer."""
    from agents import Agent
    from jaxrl.types import Batch, EnvSpec
    from tests.helpers import fill

    namespace = {}
    exec(doc_python_block("docs/plugins/index.md", "runs this block and one update of each agent"), namespace)
    agents = {name: value for name, value in namespace.items() if isinstance(value, Agent)}
    assert set(agents) == {"MEAN_TARGET", "ANNEALED_HUBER", "DECAYING_NOISE", "REWARD_MEAN", "THREE_STEP",
                           "SHRINKING", "RECENT_REWARD", "NARROWING"}
    spec, cfg = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10), sac.Config(hidden_sizes=(8,),
                                                                                         batch_size=4)
    keys = jax.random.split(KEY, 5)
    batch = Batch(obs=jax.random.normal(keys[0], (4, 3)), action=jnp.zeros((4, 2)), reward=jnp.ones(4),
                  next_obs=jax.random.normal(keys[1], (4, 3)), terminated=jnp.zeros(4, bool),
                  truncated=jnp.zeros(4, bool), discount=jnp.full(4, 0.99))
    halfway = progress_lib.at(updates=50_000 - 1, env_steps=500, planned_updates=100_000, planned_env_steps=1000)
    for name, agent in agents.items():
        state = progress_lib.attach(agent.init(keys[2], spec, cfg), halfway)
        new, metrics = jax.jit(agent.update)(state, batch, keys[3], cfg)
        assert all(np.isfinite(v) for v in jax.tree.leaves(metrics)), name
        action, _ = jax.jit(agent.act, static_argnums=4)(state, batch.obs, keys[4], cfg, False)
        assert action.shape == (4, 2) and np.all(np.abs(action) <= 1), name
    assert float(metrics_of(agents["ANNEALED_HUBER"], spec, cfg, batch, halfway)["huber_delta"]) == 1.0
    buffer = fill(16, 12, episode_length=5)
    sampled_batch = agents["THREE_STEP"].sample_batch(buffer, KEY, cfg)
    assert sampled_batch.obs.shape == (4, 1)
    recent = agents["RECENT_REWARD"]
    refreshed = recent.refresh(recent.init(keys[2], spec, cfg), buffer, KEY, cfg)
    assert recent.refresh_interval(cfg) == 10_000
    # rows t = 4..11
    assert float(refreshed.extra["reward_mean"]) == pytest.approx(np.mean(np.repeat(np.arange(4, 12), 2)))
    from jaxrl.agent import draw_batch

    narrowing = agents["NARROWING"]
    late = progress_lib.at(updates=900, env_steps=900, planned_updates=1000, planned_env_steps=1000)
    drawn = draw_batch(narrowing, progress_lib.attach(narrowing.init(keys[2], spec, cfg), late), buffer, KEY,
                       cfg.replace(batch_size=64))
    # at 90 % of the run, the newest 1 - 0.9 x 0.9 = 19 % of the 7 rows with an s' (t = 4..10): 1 row, t = 10
    np.testing.assert_array_equal(drawn.reward, np.full(64, 10.0))
    np.testing.assert_array_equal(drawn.next_obs[:, 0], drawn.obs[:, 0] + 1)


def metrics_of(agent, spec, cfg, batch, progress):
    state = progress_lib.attach(agent.init(KEY, spec, cfg), progress)
    return agent.update(state, batch, KEY, cfg)[1]


def test_from_python_runs_as_the_readme_says(capsys):
    from experiments.examples import from_python

    result = from_python.main(steps=1000, seeds=2, check=False)  # the harness on SAC runs in test_harness.py
    assert result["final_eval"].shape == (2,) and "restored state continues bitwise" in capsys.readouterr().out
    namespace = {}
    exec(doc_python_block("docs/plugins/index.md", "core of it:"), namespace)
    assert namespace["metrics"]["eval/return"].shape == (2,) and int(namespace["metrics"]["env_steps"]) == 2000


def test_fields_added_later_keep_saved_runs_and_sweep_members_as_they_were():
    """FastSAC's log_prob_epsilon and layer_norm_epsilon (official values now) did not exist when older runs were
    saved: such a run resumes with the values it trained with (the exact log pi, flax's 1e-6), and a sweep member
    saved then is not taken for today's default; SAC's num_critics, added at the value that changes nothing, leaves
    the ids of its members alone."""
    from experiments import rundir
    from experiments import sweep as sweep_lib
    from experiments.rundir import config_to_dict

    saved = {"agent": "fastsac", "run": {"env": "toy/Pendulum"}, "loop": {}, "agent_config": {"batch_size": 32}}
    cfg = rundir.resolve(saved=saved, run_dir="x").agent_cfg
    assert cfg.log_prob_epsilon is None and cfg.layer_norm_epsilon == 1e-6
    assert get_agent("fastsac").Config().log_prob_epsilon == 1e-6
    run, loop = {"env": "toy/Pendulum", "seed": 0}, {"steps": 400}
    today = config_to_dict(get_agent("fastsac").Config())
    before = {k: v for k, v in today.items() if k not in ("log_prob_epsilon", "layer_norm_epsilon")}
    assert sweep_lib.member_id("fastsac", run, loop, today) != sweep_lib.member_id("fastsac", run, loop, before)
    sac_today = config_to_dict(sac.Config())
    sac_before = {k: v for k, v in sac_today.items() if k not in ("num_critics", "policy_delay")}
    assert sweep_lib.member_id("sac", run, loop, sac_today) == sweep_lib.member_id("sac", run, loop, sac_before)
    assert sweep_lib.member_id("sac", run, loop, {**sac_today, "num_critics": 3}) != sweep_lib.member_id(
        "sac", run, loop, sac_today)


# ------------------------------------------------------------------------------ what papers change: one function

DEFAULT_TARGETS = {"sac": "soft_td_target", "td3": "clipped_td_target", "tqc": "truncated_target_atoms",
                   "dsac_t": "distributional_targets", "fasttd3": "target_distributions",
                   "fastsac": "soft_target_distributions"}


def random_batch(key, n=8, obs_size=3, action_size=2):
    from jaxrl.types import Batch

    k = jax.random.split(key, 4)
    return Batch(obs=jax.random.normal(k[0], (n, obs_size)),
                 action=jax.random.uniform(k[1], (n, action_size), minval=-1.0, maxval=1.0),
                 reward=jax.random.normal(k[2], (n,)), next_obs=jax.random.normal(k[3], (n, obs_size)),
                 terminated=jnp.arange(n) % 3 == 0, truncated=jnp.arange(n) % 4 == 1, discount=jnp.full(n, 0.9))


@pytest.mark.parametrize("name", sorted(DEFAULT_TARGETS))
def test_a_swapped_target_is_the_only_change_to_the_update(name):
    """make_update(target_fn=f) with f = the default target on rewards + 1 is bitwise the default update on a batch
    whose rewards are + 1: the target is the one place the update reads the reward, and the swap reaches it."""
    import importlib

    from jaxrl.types import EnvSpec
    from tests.test_probes import PROBES

    module = importlib.import_module(f"agents.{name}")
    default_target = getattr(module, DEFAULT_TARGETS[name])

    def on_rewards_plus_one(state, batch, key, cfg):
        return default_target(state, batch.replace(reward=batch.reward + 1.0), key, cfg)

    cfg = PROBES[name].bandit_cfg
    state = module.AGENT.init(KEY, EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10), cfg)
    batch = random_batch(jax.random.PRNGKey(3))
    swapped = jax.jit(module.make_update(target_fn=on_rewards_plus_one))(state, batch, KEY, cfg)
    shifted = jax.jit(module.update)(state, batch.replace(reward=batch.reward + 1.0), KEY, cfg)
    # (A target_fn that never reached the loss would give the update on the batch as it is, which the shifted
    # rewards change.)
    jax.tree.map(np.testing.assert_array_equal, swapped, shifted)


def test_td3_clips_with_the_minimum_over_every_critic():
    """num_critics = 3: y = r + discount (1 - terminated) min_j Qbar_j(s', smoothed a') over all three."""
    from agents import td3
    from jaxrl.types import EnvSpec

    cfg = td3.Config(hidden_sizes=(8,), num_critics=3)
    state = td3.init(KEY, EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10), cfg)
    assert jax.tree.leaves(state.critic_params)[0].shape[0] == 3
    batch, key = random_batch(jax.random.PRNGKey(5), n=64), jax.random.PRNGKey(6)
    next_action = td3.smoothed_target_action(state, batch.next_obs, key, cfg)
    next_q = np.asarray(state.critic.apply(state.target_critic_params, batch.next_obs, next_action)[..., 0])
    assert 2 in np.argmin(next_q, axis=0)  # the third critic is the smallest somewhere: the test can tell
    by_hand = np.asarray(batch.reward) + 0.9 * (1 - np.asarray(batch.terminated)) * next_q.min(axis=0)
    np.testing.assert_allclose(td3.clipped_td_target(state, batch, key, cfg), by_hand, rtol=1e-6)


def test_fasttd3_takes_the_projection_of_the_smallest_of_every_critic():
    """num_critics = 3 with clipped double Q: every critic's target is the projection whose expected value is the
    smallest of the three, per sample."""
    from agents import fasttd3
    from jaxrl.distributional import expected_value
    from jaxrl.types import EnvSpec

    cfg = fasttd3.Config(actor_hidden_sizes=(8,), critic_hidden_sizes=(8,), num_critics=3, num_atoms=11)
    state = fasttd3.init(KEY, EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10), cfg)
    batch, key = random_batch(jax.random.PRNGKey(5), n=64), jax.random.PRNGKey(6)
    projected = np.asarray(fasttd3.target_distributions(state, batch, key, cfg.replace(use_cdq=False)))
    smallest = np.argmin(np.asarray(expected_value(projected, fasttd3.support(cfg))), axis=0)
    assert projected.shape[0] == 3 and 2 in smallest
    target = np.asarray(fasttd3.target_distributions(state, batch, key, cfg))
    for j in range(3):
        np.testing.assert_allclose(target[j], projected[smallest, np.arange(64)], atol=1e-6)  # another program: ulps


def test_redq_mbpo_as_typed_on_the_command_line_names_its_plugin_and_task_value(cli):
    """`jaxrl train --config redq_mbpo --env brax/hopper --help`: the config's `module:ATTR` agent and its task table
    reach the flags' defaults as a user sees them."""
    result = cli("train", "--config", "redq_mbpo", "--env", "brax/hopper", "--help")
    assert result.returncode == 0, result.stderr
    flag = result.stdout.split("--redq.target-entropy", 1)[1].split("--redq.", 1)[0]
    assert "(default: -1.0)" in " ".join(flag.replace("│", " ").split())
