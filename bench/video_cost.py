"""The default run's final video, measured: what ``jaxrl train --video-every 50000`` renders, what it costs, and the
frames docs/guide/results.md shows.

    python bench/video_cost.py --out bench/results/video_cost.json   # trains (~8 min on 2 cores), then draws
                                                                    # docs/video_frames_sac_cartpole_swingup.png
    python bench/video_cost.py --sentence bench/results/video_cost.json  # results.md's sentence from the file

The run is ``bench/default_run.py``'s (a fresh directory, the compilation cache bypassed, the stamp of the
checkout); from it the file keeps the final video's frame count, size, return and the seconds of its rollout
(compile included), rendering and encoding (the line ``jaxrl train`` prints for each video), and the image is
frames 0, 100 and 400 of that video side by side.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import default_run
from devtime import measured_on

COMMAND = "jaxrl train --video-every 50000"
FRAMES = (0, 100, 400)
IMAGE = os.path.join(default_run.ROOT, "docs", "video_frames_sac_cartpole_swingup.png")
# What experiments/train.py prints for every video it records.
VIDEO_LINE = re.compile(r"video (?P<path>\S+): (?P<frames>\d+) frames \((?P<width>\d+)x(?P<height>\d+)\), return "
                        r"(?P<ret>[-\d.]+); rollout (?P<rollout>[\d.]+) s, render (?P<render>[\d.]+) s, encode "
                        r"(?P<encode>[\d.]+) s")


def final_video(run_dir: str, output: list[str]) -> dict:
    """The last video's figures from the run's output, and its frames FRAMES side by side (under ``image``, drawn
    only after the run's stamp is taken: the stamp would count the redrawn image as an uncommitted change)."""
    import imageio_ffmpeg
    import numpy as np

    matches = [m for m in map(VIDEO_LINE.search, output) if m]
    if not matches:
        raise SystemExit(f"{COMMAND} printed no video line; is rendering available (README, Videos)?")
    last = matches[-1]
    (path,) = [p for p in glob.glob(os.path.join(run_dir, "videos", "*.mp4"))
               if os.path.basename(p) == os.path.basename(last["path"])]
    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(raw, np.uint8).reshape(height, width, 3) for raw in reader]
    return {"image": np.concatenate([frames[k] for k in FRAMES], axis=1),
            "video": {"file": os.path.basename(path), "frames": int(last["frames"]),
                      "width": int(last["width"]), "height": int(last["height"]), "return": float(last["ret"]),
                      "rollout_s": float(last["rollout"]), "render_s": float(last["render"]),
                      "encode_s": float(last["encode"]), "image_frames": list(FRAMES)}}


def sentence(path: str) -> str:
    """results.md's paragraph from the newest run of a file ``--out`` wrote."""
    try:
        with open(path) as f:
            run = json.load(f)["runs"][-1]
        video = run["video"]
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise SystemExit(f"{path}: not a results file of bench/video_cost.py ({type(e).__name__}: {e})") from None
    total = video["rollout_s"] + video["render_s"] + video["encode_s"]
    *first, last = video["image_frames"]
    return (f"Frames {', '.join(map(str, first))} and {last} of the final video of the README's first command with "
            f"`--video-every 50000` (SAC on `dmc/CartpoleSwingup`, return {video['return']:.0f}). That video "
            f"({video['frames']} frames, {video['width']}x{video['height']}) cost {total:.0f} s: rollout "
            f"{video['rollout_s']:.1f} s (its program's compile included), rendering {video['render_s']:.1f} s, "
            f"encoding {video['encode_s']:.1f} s, on top of the run's training time ({measured_on(run)}; `python "
            f"bench/video_cost.py --out {path}` draws the image and keeps these figures)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="measure: the results file to write")
    parser.add_argument("--sentence", metavar="FILE", help="print results.md's sentence from this results file")
    args = parser.parse_args()
    if args.sentence:
        print(sentence(args.sentence))
        return 0
    if not args.out:
        parser.error("give --out FILE (measure) or --sentence FILE (print)")
    import matplotlib.image

    run = default_run.measure(COMMAND.split(), inspect=final_video)
    image = run.pop("image")
    default_run.write_runs(args.out, [run])
    matplotlib.image.imsave(IMAGE, image)
    print(sentence(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
