"""What several test files share: a tiny training helper, SAC's hand-computable networks and batch, the CLI
runner and its one-line-error check, the tiny run's settings, and the buffer tests' ring filler."""
import contextlib
import json
import math
import os
import re
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest

import envs
from agents import sac
from jaxrl import buffer as buffer_lib
from jaxrl.loop import make_train
from jaxrl.types import Batch, EnvSpec


def train(env_name, loop_cfg, agent_cfg, seed=0, seeds=1, agent=sac.AGENT):
    # As the CLI makes them (experiments.train.make_envs): a resolved dmc/ config repeats each action twice.
    options = dict(action_repeat=loop_cfg.action_repeat, episode_length=loop_cfg.episode_length)
    env = envs.make(env_name, loop_cfg.num_envs, **options)
    eval_env = envs.make(env_name, loop_cfg.num_eval_envs, **options)
    trainer = make_train(agent, env, eval_env, loop_cfg, agent_cfg)
    state = trainer.init(seed, seeds)
    history = []
    for _ in range(math.ceil(loop_cfg.steps / trainer.schedule.chunk_env_steps)):
        state, metrics = trainer.run_chunk(state)
        history.append(jax.device_get(metrics))
    return state, history


class FixedActor(nn.Module):
    """mean and log_std are parameters, independent of the observation."""

    @nn.compact
    def __call__(self, obs):
        mean = self.param("mean", lambda k: jnp.array([0.2]))
        log_std = self.param("log_std", lambda k: jnp.array([-1.0]))
        return jnp.broadcast_to(mean, obs.shape[:-1] + (1,)), jnp.broadcast_to(log_std, obs.shape[:-1] + (1,))


class LinearCritics(nn.Module):
    """Two critics Q_j(s, a) = w_j s + v_j a, output [2, B, 1]."""

    @nn.compact
    def __call__(self, obs, action):
        w = self.param("w", lambda k: jnp.array([1.0, 2.0]))
        v = self.param("v", lambda k: jnp.array([0.5, -1.0]))
        q = w[:, None] * obs[None, :, 0] + v[:, None] * action[None, :, 0]
        return q[..., None]


CFG = sac.Config(gamma=0.9, tau=0.1, init_alpha=0.5)


BATCH = Batch(obs=jnp.array([[1.0], [2.0]]), action=jnp.array([[0.5], [-0.5]]), reward=jnp.array([1.0, -1.0]),
              next_obs=jnp.array([[3.0], [-1.0]]), terminated=jnp.array([False, True]),
              truncated=jnp.array([True, False]), discount=jnp.array([0.9, 0.9]))  # one-step: gamma = CFG.gamma


KEY = jax.random.PRNGKey(7)


def make_state(target_scale=1.0):
    actor, critic = FixedActor(), LinearCritics()
    actor_params = actor.init(KEY, BATCH.obs)
    critic_params = critic.init(KEY, BATCH.obs, BATCH.action)
    target = jax.tree.map(lambda x: target_scale * x, critic_params)
    log_alpha = jnp.log(jnp.float32(CFG.init_alpha))
    opt = optax.adam(1e-3)
    return sac.State(actor_params=actor_params, critic_params=critic_params, target_critic_params=target,
                     log_alpha=log_alpha, target_entropy=jnp.float32(-1.0), actor_opt_state=opt.init(actor_params),
                     critic_opt_state=opt.init(critic_params), alpha_opt_state=opt.init(log_alpha),
                     actor=actor, critic=critic)


def sampled(key, n, epsilon=0.0):
    """The tanh-Gaussian sample and log-prob the losses draw with ``key``, computed by hand in numpy (``epsilon``:
    the log(1 - tanh^2 + epsilon) form of PyTorch code, FastSAC's)."""
    eps = np.asarray(jax.random.normal(key, (n, 1)), np.float64)[:, 0]
    mean, std = 0.2, np.exp(-1.0)
    u = mean + std * eps
    log_prob = -0.5 * eps**2 - np.log(std) - 0.5 * np.log(2 * np.pi) - np.log(1 - np.tanh(u) ** 2 + epsilon)
    return np.tanh(u), log_prob


def tiny(agent="sac"):
    split_widths = [f"--{agent}.actor-hidden-sizes", "16", "16", f"--{agent}.critic-hidden-sizes", "16", "16"]
    simba_widths = ["--simbav2.actor-hidden-dim", "16", "--simbav2.critic-hidden-dim", "16"]
    tdmpc_sizes = ["--tdmpc2.latent-dim", "16", "--tdmpc2.hidden-dim", "16", "--tdmpc2.encoder-dim", "16",
                   "--tdmpc2.num-samples", "32", "--tdmpc2.num-elites", "4", "--tdmpc2.num-pi-trajs", "4",
                   "--tdmpc2.iterations", "1", "--pretrain-updates", "10"]
    widths = {"tqc": split_widths, "dsac_t": split_widths, "crossq": split_widths, "simbav2": simba_widths,
              "tdmpc2": tdmpc_sizes,
              # Their loop defaults' updates per step (2/128, 8/4096) would make 4 envs' update blocks longer
              # than the tiny run's 200-step chunks.
              "fasttd3": [*split_widths, "--updates-per-step", "0.25"],
              "fastsac": [*split_widths, "--updates-per-step", "0.25"]}
    return ["--agent", agent, "--env", "toy/Pendulum", "--num-envs", "4", "--num-eval-envs", "2",
            "--eval-every", "200", "--learning-starts", "200", "--buffer-size", "4000",
            *widths.get(agent, [f"--{agent}.hidden-sizes", "16", "16"]), f"--{agent}.batch-size", "32"]


TINY = tiny()


@contextlib.contextmanager
def tmpfs(mount, size):
    """A tmpfs of ``size`` (e.g. "2m") mounted at the new directory ``mount`` for the block; skips the test where it
    cannot be mounted (needs root with mount rights; CI runs as root)."""
    os.makedirs(mount)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root with mount rights)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def jaxrl(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("jaxrl: error:"), result.stderr
    assert len([line for line in lines if line.startswith("jaxrl: error:")]) == 1
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


def saved_state(run_dir, step):
    """The whole saved training state as {key path: array}."""
    return ocp.StandardCheckpointer().restore(os.path.join(run_dir, "checkpoints", str(step), "state"))


# The tiny SAC run of these tests as config-file tables (test_reproduce uses them too).
TINY_TABLES = """
[loop]
steps = 400
num_envs = 4
num_eval_envs = 2
eval_every = 200
learning_starts = 200
buffer_size = 4000
[agent_config]
batch_size = 32
hidden_sizes = [16, 16]
"""


# The buffer tests' ring: N envs of 1-d observations and actions.
N, OBS, ACT = 2, 1, 1


# Structured observations in the buffer tests: the parts of observation x (= 100 e + t).
PARTS = {"state": lambda x: x, "privileged_state": lambda x: jnp.concatenate([x, 2.0 * x], axis=-1)}


def fill(capacity, steps, episode_length, can_terminate=False, terminate_at=(), structured=False, terminal_obs=True):
    """Write ``steps`` rows. Env e at global step t observes x = 100 e + t; every ``episode_length`` decisions the
    episode is truncated (or terminated at steps in ``terminate_at``) with true final obs -(x + 1). Structured:
    the observation is {part: PARTS[part](x)} and each part's final obs is -(part + 1)."""
    parts = (("state", 1), ("privileged_state", 2)) if structured else ()
    spec = EnvSpec(3 if structured else OBS, ACT, episode_length, can_terminate, obs_parts=parts)
    state = buffer_lib.init(buffer_lib.layout(capacity, N, spec, terminal_obs=terminal_obs))
    ep_step = np.zeros(N, np.int32)
    for t in range(steps):
        x = jnp.array([[100.0 * e + t] for e in range(N)])
        obs = {name: part(x) for name, part in PARTS.items()} if structured else x
        ended = (ep_step + 1) >= episode_length
        terminated = np.array([t in terminate_at] * N)
        truncated = ended & ~terminated
        final = jax.tree.map(lambda o: -(o + 1.0), obs)
        state = buffer_lib.add(state, obs, jnp.full((N, ACT), float(t)), jnp.full((N,), float(t)),
                               jnp.asarray(terminated), jnp.asarray(truncated), final, jnp.asarray(ep_step))
        ep_step = np.where(terminated | truncated, 0, ep_step + 1)
    return state


def wandb_offline_runs(run_dir):
    """The offline W&B runs under ``run_dir/wandb`` in start order, each as {id, group, tags, config, history,
    summary}: read from their ``run-<id>.wandb`` transaction logs (a LevelDB-style log of protobuf records, 32 KiB
    blocks, 7-byte record headers; wandb no longer ships a Python reader)."""
    import glob

    from wandb.proto import wandb_internal_pb2 as pb

    runs = []
    # By last write, not by name: once in a full suite run the directory names sorted the resumed run first
    # (test_a_resumed_wandb_run_skips...); each run here finishes before the next starts, so write order is start order.
    for path in sorted(glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb")), key=os.path.getmtime):
        data = open(path, "rb").read()
        assert data[:4] == b":W&B", path
        pos, pending, records = 7, b"", []
        while pos + 7 <= len(data):
            left = 32768 - pos % 32768
            if left < 7:  # a block's tail too short for a header is padding
                pos += left
                continue
            length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
            pending += data[pos + 7:pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):  # a FULL record, or the LAST piece of one
                record = pb.Record()
                record.ParseFromString(pending)
                records.append(record)
                pending = b""
        run = {"config": {}, "history": [], "summary": {}}
        for record in records:
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run.update(id=record.run.run_id, group=record.run.run_group, tags=list(record.run.tags))
                run["config"].update({i.key: json.loads(i.value_json) for i in record.run.config.update})
            elif kind == "config":
                run["config"].update({i.key: json.loads(i.value_json) for i in record.config.update})
            elif kind == "history":
                run["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                       for i in record.history.item})
            elif kind == "summary":
                run["summary"].update({i.key: json.loads(i.value_json) for i in record.summary.update if i.key})
        runs.append(run)
    return runs


def tensorboard_events(run_dir):
    """Every TensorBoard event of ``run_dir/tensorboard`` in file order: TFRecord framing (8-byte length, 4-byte
    CRC, the Event proto, 4-byte CRC) read with tensorboardX's own proto (the tensorboard package is not needed)."""
    import glob

    from tensorboardX.proto.event_pb2 import Event

    events = []
    for path in sorted(glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*"))):
        data, pos = open(path, "rb").read(), 0
        while pos + 12 <= len(data):
            length = int.from_bytes(data[pos:pos + 8], "little")
            event = Event()
            event.ParseFromString(data[pos + 12:pos + 12 + length])
            events.append(event)
            pos += 12 + length + 4
    return events


def doc_python_block(page, marker, language="python"):
    """The first fenced ``language`` block after the line holding ``marker`` on ``page`` (``README.md`` or a path
    under ``docs/``)."""
    text = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), page)).read()
    return re.search(rf"```{language}\n(.*?)```", text[text.index(marker):], re.S).group(1)


def doc_block(page, marker):
    """The command lines (comments dropped) of the first bash block after the line holding ``marker`` on ``page``."""
    lines = (line.split("#")[0].strip() for line in doc_python_block(page, marker, "bash").splitlines())
    return [line for line in lines if line]


def assert_restored_checkpoint_continues_bitwise(trainer, state, directory) -> None:
    """``state`` saved to ``directory`` and restored runs its next chunk exactly as the state that was never saved
    (every leaf, every member)."""
    from jaxrl import checkpoint

    checkpoint.save(checkpoint.manager(str(directory)), int(state.env_steps), state)
    restored, _ = checkpoint.restore(str(directory), jax.eval_shape(lambda: state))
    continued, _ = trainer.run_chunk(jax.tree.map(np.copy, jax.device_get(state)))
    again, _ = trainer.run_chunk(restored)
    for a, b in zip(jax.tree.leaves(continued), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(a, b)
