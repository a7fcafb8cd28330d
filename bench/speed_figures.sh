#!/usr/bin/env bash
# Re-measures every speed figure of the README's "Speed" section into fresh results files (one benchmark at a
# time: run it on a quiet machine). Each line keeps its command, date, commit and environment block
# (`provenance`); the README's tables are the scripts' `--table` output of these files (tests/test_figures.py).
#   bash bench/speed_figures.sh                 # ~1 h on 2 CPU cores (PY=python to use: default .venv/bin/python)
#   SBX_PYTHON=/path/to/python bash bench/speed_figures.sh   # also SBX (a venv with '.[bench]' and torch)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
R=bench/results
rm -f $R/compile_time.jsonl $R/every_agent_speed.jsonl $R/time_to_score.jsonl $R/sweep_vs_sequential.jsonl \
  $R/vs_sbx.jsonl
$PY bench/compile_time.py --agents sac td3 dsac_t tqc simbav2 tdmpc2 fastsac fasttd3 crossq --out $R/compile_time.jsonl
$PY bench/sac_vs_brax.py --envs dmc/CartpoleSwingup --num-envs 16 --agents sac td3 tqc dsac_t simbav2 crossq --skip-brax \
  --updates 256 --out $R/every_agent_speed.jsonl
$PY bench/sac_vs_brax.py --envs dmc/CartpoleSwingup --num-envs 16 --time-to-score 800 --max-steps 100000 \
  --out $R/time_to_score.jsonl --extra --action-repeat 1 --updates-per-step 1
$PY bench/sweep_vs_sequential.py --steps 10000 --out $R/sweep_vs_sequential.jsonl
$PY bench/sweep_vs_sequential.py --steps 10000 --cpu-devices 2 --out $R/sweep_vs_sequential.jsonl
$PY bench/sweep_vs_sequential.py --env toy/Pendulum --num-envs 4 --hidden 64 --steps 20000 \
  --out $R/sweep_vs_sequential.jsonl
$PY bench/sweep_vs_sequential.py --env toy/Pendulum --num-envs 1 --hidden 16 --batch-size 32 --steps 20000 \
  --out $R/sweep_vs_sequential.jsonl
if [ -n "${SBX_PYTHON:-}" ]; then
  $SBX_PYTHON bench/vs_sbx.py --out $R/vs_sbx.jsonl
fi
