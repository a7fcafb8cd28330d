"""``jaxrl video RUN_DIR [--step K] [--episodes N] [--out F.mp4]``: render a saved checkpoint's policy.

Episode k of checkpoint N uses the key that training's ``--video-every`` video at env step N used for its one
episode, folded with k: episode 0 is that video's episode exactly (tests/test_video.py checks the frames).
"""
from __future__ import annotations

import os
import time
from typing import Any


def render_checkpoint(run_dir: str, out: str | None = None, step: int | None = None, episodes: int = 1,
                      member: int = 0, width: int | None = None, height: int | None = None) -> dict[str, Any]:
    """Write ``episodes`` deterministic episodes of member ``member`` at checkpoint ``step`` (default: the newest) as
    one MP4 (default ``RUN_DIR/videos/checkpoint_<step>.mp4``); returns what it wrote and what each part cost."""
    from experiments.export import restore_run
    from experiments.rundir import check_output_file
    from experiments.signals import REQUESTS, temporaries
    from jaxrl import ConfigError
    from jaxrl.video import (
        check_can_record,
        episode_key,
        frames_per_second,
        make_recorder,
        member_view,
        record,
        write_mp4,
    )

    if not isinstance(episodes, int) or episodes < 1:
        raise ConfigError(f"--episodes must be a positive integer, got {episodes!r}")
    restored = restore_run(run_dir, step)
    if not 0 <= member < len(restored.members):
        raise ConfigError(f"--member {member} is out of range: {run_dir} has members 0..{len(restored.members) - 1}")
    program = restored.trainer.program
    width, height = width or restored.run.video_width, height or restored.run.video_height
    check_can_record(program.eval_env.raw, width, height)
    out = out or os.path.join(run_dir, "videos", f"checkpoint_{restored.step}.mp4")
    check_output_file(out, "--out", ("mp4",))  # before rendering: never a lost render
    recorder, view = make_recorder(program), member_view(restored.state, member)
    seed = restored.members[member][0]
    frames, returns, rollout_s, render_s = [], [], 0.0, 0.0
    for k in range(episodes):
        info = record(program, recorder, view, episode_key(seed, restored.step, k), width, height)
        frames += info["frames"]
        returns.append(info["return"])
        rollout_s += info["rollout_s"]
        render_s += info["render_s"]
    t0 = time.perf_counter()
    # write_mp4 encodes to a temporary file and renames it; a stop signal ends the process at once, maybe mid-write.
    with REQUESTS.on_stop(temporaries(out)):
        try:
            write_mp4(out, frames, frames_per_second(program))
        except OSError as e:  # a place the checks could not foresee (/proc, a full disk): one line
            raise ConfigError(f"--out {out} cannot be written ({e.strerror or e})") from None
    return {"path": out, "env_steps": restored.step, "frames": len(frames), "returns": returns,
            "rollout_s": rollout_s, "render_s": render_s, "encode_s": time.perf_counter() - t0,
            "width": width, "height": height}
