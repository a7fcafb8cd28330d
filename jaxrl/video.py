"""Videos of a policy: deterministic evaluation episodes of one env, rolled out by their own jitted program, drawn by
the env's renderer (MuJoCo, ``RawEnv.render``) and written as H.264 MP4s.

The rollout is a separate program from the training chunk and reads the training state without changing it, so
training's speed (``env_steps_per_s`` times the chunks alone), its RNG stream and the bitwise resume are the same
with videos on or off. It steps the raw env without auto-reset for one time limit of decisions, keeps every state
until the episode ends (a termination ends it early) and returns them for the host to render: frames = the reset
state plus one per decision taken, at 1 / (control_dt x action_repeat) frames per second.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import time
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import ConfigError

VIDEO_MISSING = "videos need imageio-ffmpeg: pip install 'jaxrl[video]'"


class Episode(NamedTuple):
    """One recorded episode: the raw env states after reset and after each decision ([T + 1] leading axis), which
    of them belong to the episode (a termination at decision k leaves k + 2.. T out), and its return."""

    states: Any
    in_episode: jax.Array  # [T + 1] bool
    episode_return: jax.Array


def check_can_record(raw_env, width: int, height: int) -> None:
    """Everything a video needs, checked before a run compiles: a renderer for this env, imageio-ffmpeg, and an
    OpenGL backend that draws a frame at this size (ConfigError, one line, otherwise)."""
    from envs.rendering import check_renderer

    if raw_env.render is None:
        raise ConfigError(f"{raw_env.name} cannot render a video (toy envs have no MuJoCo model to draw); videos "
                          "need a brax/, dmc/, locomotion/ or manipulation/ env")
    if importlib.util.find_spec("imageio_ffmpeg") is None:
        raise ConfigError(VIDEO_MISSING)
    check_renderer(width, height)


def episode_key(seed: int, env_step: int, episode: int = 0):
    """The key of a video's episode ``episode`` at ``env_step``: training's video at a step is episode 0, so
    ``jaxrl video`` renders exactly that episode again."""
    key = jax.random.fold_in(jax.random.PRNGKey(seed), env_step)
    return key if episode == 0 else jax.random.fold_in(key, episode)


def frames_per_second(program) -> float:
    dt = program.eval_env.raw.control_dt or 0.02
    return 1.0 / (dt * program.eval_env.action_repeat)


def member_view(state, member: int = 0):
    """(agent, hparams, normalizers) of one member of a TrainState (its leading member axis taken away)."""
    pick = functools.partial(jax.tree.map, lambda x: x[member])
    return pick(state.agent), pick(state.hparams), pick(state.normalizers)


def make_recorder(program):
    """The jitted rollout ``(agent_state, hparams, normalizers, key) -> Episode`` of one member's deterministic
    policy on one eval env, acting exactly as the evaluation does (normalised observations, a fresh carry)."""
    from jaxrl.loop import observe

    env, agent = program.eval_env, program.agent
    decisions = env.decisions_per_episode

    def rollout(agent_state, hparams, normalizers, key):
        reset_key, act_key = jax.random.split(key)
        raw_state, obs = env.raw.reset(reset_key)
        carry = agent.init_carry(1, program.spec, program.agent_cfg)

        def step(scanned, key):
            raw_state, obs, carry, running, total = scanned
            batch = jax.tree.map(lambda x: x[None].astype(jnp.float32), obs)
            action, carry = agent.act(agent_state, observe(program, normalizers, batch), key, hparams, True, carry)
            raw_state, obs, reward, terminated = env.repeated_step(raw_state, action[0])
            total = total + jnp.where(running, reward, 0.0)
            return (raw_state, obs, carry, running & ~terminated, total), (raw_state, running)

        initial = (raw_state, obs, carry, jnp.bool_(True), jnp.float32(0.0))
        (*_, total), (states, taken) = jax.lax.scan(step, initial, jax.random.split(act_key, decisions))
        states = jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]), raw_state, states)
        return Episode(states, jnp.concatenate([jnp.ones((1,), jnp.bool_), taken]), total)

    return jax.jit(rollout)


def write_mp4(path: str, frames: list[np.ndarray], fps: float) -> None:
    """H.264 MP4 (yuv420p, plays everywhere) through imageio-ffmpeg's own ffmpeg binary."""
    import imageio_ffmpeg

    height, width = frames[0].shape[:2]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}.mp4"
    writer = imageio_ffmpeg.write_frames(tmp, (width, height), fps=fps, quality=7, macro_block_size=1,
                                         ffmpeg_log_level="error")
    with warnings.catch_warnings():
        # Python warns on any fork in a multithreaded process; ffmpeg is a fresh program (fork + exec), not a copy
        # of JAX's threads.
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        writer.send(None)
    for frame in frames:
        writer.send(np.ascontiguousarray(frame, np.uint8))
    writer.close()
    os.replace(tmp, path)  # a crash leaves no half-written video under the final name


def read_mp4(path: str) -> tuple[list[np.ndarray], float]:
    """(frames, fps) of an MP4: what a test or a user checks a written video with."""
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(height, width, 3) for f in reader]
    return frames, float(meta["fps"])


def render_episode(raw_env, episode: Episode, width: int, height: int) -> list[np.ndarray]:
    states, keep = jax.device_get((episode.states, episode.in_episode))
    count = int(np.sum(keep))
    return [np.asarray(f) for f in raw_env.render([jax.tree.map(lambda x, i=i: x[i], states) for i in range(count)],
                                                  width, height)]


def record(program, recorder, view, key, width: int, height: int) -> dict[str, Any]:
    """One episode of member ``view`` = (agent, hparams, normalizers) rendered: {frames, return, rollout_s (the
    first call compiles), render_s}."""
    t0 = time.perf_counter()
    episode = jax.block_until_ready(recorder(*view, key))
    t1 = time.perf_counter()
    frames = render_episode(program.eval_env.raw, episode, width, height)
    return {"frames": frames, "return": float(episode.episode_return), "rollout_s": t1 - t0,
            "render_s": time.perf_counter() - t1, "width": width, "height": height}


class VideoSchedule:
    """When a training run records: every ``every`` env steps (the first chunk boundary at or past each multiple)
    and at the end, each video named by the env step it shows."""

    def __init__(self, program, run_dir: str, every: int, width: int, height: int, seed: int):
        self.program, self.every, self.width, self.height, self.seed = program, every, width, height, seed
        self.directory = os.path.join(run_dir, "videos")
        self.recorder = make_recorder(program)
        self.last_recorded = None

    def due(self, previous_env_step: int, env_step: int, final: bool) -> bool:
        return env_step != self.last_recorded and (final or env_step // self.every > previous_env_step // self.every)

    def record(self, state, env_step: int) -> dict[str, Any]:
        """Member 0's video at this env step, written to ``videos/env_step_<N>.mp4``; its key depends only on the
        seed and the step (a resumed run records the same episode)."""
        key = episode_key(self.seed, env_step)
        info = record(self.program, self.recorder, member_view(state), key, self.width, self.height)
        t0 = time.perf_counter()
        info["path"] = os.path.join(self.directory, f"env_step_{env_step}.mp4")
        info["fps"] = frames_per_second(self.program)
        write_mp4(info["path"], info["frames"], info["fps"])
        info["encode_s"] = time.perf_counter() - t0
        self.last_recorded = env_step
        return info
