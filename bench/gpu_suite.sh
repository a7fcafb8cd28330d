#!/usr/bin/env bash
# The GPU benchmark suite, one prepared script for a lent accelerator machine (about 8 minutes, compiles included):
#
#   1. FastTD3 on locomotion/T1JoystickFlatTerrain at 1024 envs with FastTD3's exact Playground config
#      (experiments/configs/fasttd3_playground.toml, its [tasks] table for T1: batch 32768, 2 updates per batched
#      step, official widths, pushes off): env steps/s and ms per update (bench/massive.py --config ... --full).
#      Published anchor (FastTD3 paper, one A100, bf16): 15.2k env steps/s, <=15-33 ms per update. jaxrl trains in
#      float32 (agents/fasttd3.py, deviations).
#   2. Every agent's training throughput (sac td3 dsac_t tqc simbav2 tdmpc2 fasttd3 fastsac, default widths and
#      update ratios) on dmc/CheetahRun at 1024, 128 and 1 envs (bench/throughput.py): env steps/s and updates/s
#      of one compiled training chunk, after compile and warm-up.
#
#   3. (part "crossq", not in the default PARTS) CrossQ against SAC at equal env steps on $GPU_SUITE_CROSSQ_TASKS
#      (default dmc/FingerSpin dmc/ReacherHard), 3 seeds vmapped per run, the CrossQ paper's DMC protocol
#      (bench/crossq_vs_sac.py): one training process per (agent, task), all at once, each stopped at the deadline
#      with the evaluations it reached; their run directories' metrics are collected into the results file and
#      copied (without checkpoints) to $OUT/runs/.
#   4. (part "sac_dmc", not in the default PARTS) the runs of `jaxrl reproduce sac_dmc` (pytorch_sac's settings, TD-MPC2's
#      batch 512) on $GPU_SUITE_SAC_DMC_TASKS (default dmc/FingerSpin dmc/WalkerWalk dmc/WalkerRun dmc/ReacherHard),
#      100k env steps, 3 seeds, one process per task (bench/reproduce_runs.py); their run directories come back
#      without checkpoints in $OUT/reproduce_sac_dmc/, for `jaxrl reproduce sac_dmc --report-only --out ...` here.
#   5. (part "brax", not in the default PARTS; run it alone, as its figures are timings) our SAC against Brax's SAC at
#      the identical config (bench/sac_vs_brax.py: batch 256, 2x256, one update per env step) on $GPU_SUITE_BRAX_ENV
#      (default dmc/CartpoleSwingup): one update of each alone (--updates-only), then training throughput and
#      compile at $GPU_SUITE_BRAX_NUM_ENVS envs (default 16); its lines go to $OUT/sac_vs_brax_gpu.jsonl, for
#      `python bench/sac_vs_brax.py --table` here.
#
# Both run at once, in up to 1 + $GPU_SUITE_JOBS processes, so that their XLA compiles (most of the time) overlap;
# everything that runs on the device holds one lock (bench/devtime.py), so timed runs never share the device (but
# XLA:GPU autotunes kernels on it while compiling, outside the lock). The throughput settings are a shared queue,
# 1024 envs first: what the deadline cuts off is the 1-env end, and every setting without a row gets a "skipped" row. Output: one JSON line per setting on stdout and in
# $OUT/gpu_suite.jsonl (when $OUT is set; each process's stderr in $OUT/logs/), then a compact summary.
#
# Preparation on the CPU machine, once per checkout: `bash bench/gpu_carry.sh` builds .whl/ (28 MiB: the cp312
# wheels of MuJoCo, MJX, Playground, Brax and their load-time imports, and the T1 robot model), git-ignored.
#
# The device tool's call (the command is 23 characters; the machine has JAX with CUDA, Python 3.12, no network):
#   run(command="bash bench/gpu_suite.sh", carry=[".whl"], timeout_s=600)
# The script installs the wheels itself, exactly as
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
# and unpacks .whl/menagerie_robots.tar.gz into /tmp/site, then puts /tmp/site on PYTHONPATH.
#
# Settings (environment variables):
#   GPU_SUITE_BUDGET_S   seconds for the whole suite, install included (default 480); settings that would end
#                        later are skipped, processes still running at the end are stopped
#   GPU_SUITE_JOBS       throughput processes (default 8; the machine has 16 cores)
#   GPU_SUITE_PARTS      "t1 throughput" (default), or any of t1, throughput, crossq, sac_dmc, brax (brax alone:
#                        its figures are timings, and nothing else may share the device meanwhile)
#   GPU_SUITE_AGENTS, GPU_SUITE_NUM_ENVS, GPU_SUITE_ENV   the throughput grid (defaults above)
#   GPU_SUITE_CROSSQ_TASKS, GPU_SUITE_CROSSQ_STEPS (default 100000), GPU_SUITE_CROSSQ_SEEDS (3)   part "crossq"
#   GPU_SUITE_SAC_DMC_TASKS, GPU_SUITE_SAC_DMC_STEPS (default 100000), GPU_SUITE_SAC_DMC_SEEDS (3)   part "sac_dmc"
#   GPU_SUITE_BRAX_ENV, GPU_SUITE_BRAX_NUM_ENVS (default 16)   part "brax"
#   GPU_SUITE_PYTHON     the interpreter (default python3); GPU_SUITE_SITE the install target (default /tmp/site)
#   JAXRL_BENCH_SERIAL_COMPILE=1   one XLA compile at a time inside each process (default: a process compiles its
#                        initial state and its timed programs in parallel threads)
#   GPU_SUITE_SMOKE=1    a CPU check of the whole path (no GPU required): T1 at 4 envs with reduced widths and
#                        batch, every agent at 2 envs on toy/Pendulum, 2 processes (on 2 cores: T1 3-4 min,
#                        the agents 2-4 min; GPU_SUITE_PARTS runs them apart)
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
SMOKE=${GPU_SUITE_SMOKE:-0}
BUDGET=${GPU_SUITE_BUDGET_S:-480}
PARTS=${GPU_SUITE_PARTS:-t1 throughput}
AGENTS=${GPU_SUITE_AGENTS:-sac td3 dsac_t tqc simbav2 tdmpc2 fasttd3 fastsac}
PY=${GPU_SUITE_PYTHON:-python3}
SITE=${GPU_SUITE_SITE:-/tmp/site}
BRAX_ENV=${GPU_SUITE_BRAX_ENV:-dmc/CartpoleSwingup}
if [ "$SMOKE" = 1 ]; then
  JOBS=${GPU_SUITE_JOBS:-2}
  NUM_ENVS=${GPU_SUITE_NUM_ENVS:-2}
  ENV=${GPU_SUITE_ENV:-toy/Pendulum}
  T1_NUM_ENVS=4
  T1_ARGS=(--num-envs 4 --iters 2)
  TP_ARGS=(--target-iters 2 --min-seconds 0 --max-repeats 1)
  CQ_TASKS=${GPU_SUITE_CROSSQ_TASKS:-dmc/FingerSpin}
  CQ_ARGS=(--steps "${GPU_SUITE_CROSSQ_STEPS:-6000}" --seeds "${GPU_SUITE_CROSSQ_SEEDS:-1}" --eval-every 3000)
  SD_TASKS=${GPU_SUITE_SAC_DMC_TASKS:-dmc/FingerSpin}
  SD_ARGS=(--steps "${GPU_SUITE_SAC_DMC_STEPS:-2000}" --seeds "${GPU_SUITE_SAC_DMC_SEEDS:-1}"
           --override "agent_config.hidden_sizes=[32, 32]" --override agent_config.batch_size=64
           --override loop.learning_starts=500 --override loop.eval_every=1000)
  BRAX_NUM_ENVS=${GPU_SUITE_BRAX_NUM_ENVS:-2}
  BRAX_UPDATE_ARGS=(--updates 64 --rounds 2)
  BRAX_TRAIN_ARGS=(--updates 64)
else
  JOBS=${GPU_SUITE_JOBS:-8}
  NUM_ENVS=${GPU_SUITE_NUM_ENVS:-1024 128 1}
  ENV=${GPU_SUITE_ENV:-dmc/CheetahRun}
  T1_NUM_ENVS=1024  # the config's num_envs (bench/massive.py takes it from there)
  T1_ARGS=(--full --iters 20)
  TP_ARGS=(--min-seconds 1 --max-repeats 5)
  CQ_TASKS=${GPU_SUITE_CROSSQ_TASKS:-dmc/FingerSpin dmc/ReacherHard}
  CQ_ARGS=(--steps "${GPU_SUITE_CROSSQ_STEPS:-100000}" --seeds "${GPU_SUITE_CROSSQ_SEEDS:-3}" --eval-every 10000)
  SD_TASKS=${GPU_SUITE_SAC_DMC_TASKS:-dmc/FingerSpin dmc/WalkerWalk dmc/WalkerRun dmc/ReacherHard}
  SD_ARGS=(--steps "${GPU_SUITE_SAC_DMC_STEPS:-100000}" --seeds "${GPU_SUITE_SAC_DMC_SEEDS:-3}")
  BRAX_NUM_ENVS=${GPU_SUITE_BRAX_NUM_ENVS:-16}
  BRAX_UPDATE_ARGS=()
  BRAX_TRAIN_ARGS=()
fi

work=$(mktemp -d /tmp/gpu_suite.XXXXXX)
if [ -n "${OUT:-}" ]; then RESULTS=$OUT/gpu_suite.jsonl; LOGS=$OUT/logs; else RESULTS=$work/gpu_suite.jsonl; LOGS=$work/logs; fi
mkdir -p "$LOGS"
touch "$RESULTS"
line() {  # one JSON line to stdout and the results file
  echo "$1"
  echo "$1" >> "$RESULTS"
}

# The carried wheels and robot models (bench/gpu_carry.sh); without .whl/ they must be importable already.
if [ -d .whl ]; then
  if ! "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
      > "$LOGS/pip.log" 2>&1; then
    tail -5 "$LOGS/pip.log"
    line "{\"bench\": \"suite\", \"error\": \"pip install of .whl/ failed (logs/pip.log)\"}"
    exit 1
  fi
  tar -xzf .whl/menagerie_robots.tar.gz -C "$SITE"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
[ -w "${HOME:-/nonexistent}" ] || export HOME=$work/home  # envs/menagerie.py links the robots under ~/.cache/jaxrl
export MUJOCO_GL=${MUJOCO_GL:-disable}                   # no rendering: MuJoCo then never looks for OpenGL
export XLA_PYTHON_CLIENT_PREALLOCATE=false               # several JAX processes share the device
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-1}
export JAXRL_BENCH_LOCK=$work/device.lock
export JAXRL_BENCH_DEADLINE=$((T0 + BUDGET - 15))

# What is there: versions, devices; without a GPU (and not a smoke run) nothing is worth timing.
if ! "$PY" - "$SMOKE" "$BUDGET" "$JOBS" "$(($(date +%s) - T0))" > "$work/start.json" 2> "$LOGS/start.err" <<'EOF'
import importlib.metadata as md, json, os, platform, sys
import jax
smoke, budget, jobs, install_s = sys.argv[1] == "1", int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
versions = {}
for name in ("jax", "jaxlib", "flax", "optax", "mujoco", "mujoco-mjx", "playground", "brax"):
    try:
        versions[name] = md.version(name)
    except md.PackageNotFoundError:
        versions[name] = None
devices = jax.devices()
row = {"bench": "suite", "event": "start", "python": platform.python_version(), "versions": versions,
       "platform": devices[0].platform, "devices": [d.device_kind for d in devices], "cpus": os.cpu_count(),
       "budget_s": budget, "jobs": jobs, "smoke": smoke, "install_s": install_s}
# What produced the figures (jaxrl.provenance): the command, date, stack and device; the commit from the checkout
# that built .whl/ (bench/gpu_carry.sh), as the device's copy of the tree has no .git.
try:
    from jaxrl import provenance

    command = " ".join([f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("GPU_SUITE_")]
                       + ["bash bench/gpu_suite.sh"])
    row["provenance"] = provenance.stamp(command)
    if row["provenance"]["commit"] is None and os.path.exists(".whl/checkout.json"):
        with open(".whl/checkout.json") as f:
            git = {**json.load(f), "carried_from": "bench/gpu_carry.sh"}
        row["provenance"]["environment"]["git"], row["provenance"]["commit"] = git, git.get("commit")
except Exception as e:  # a figure without its stamp is still a figure; say why
    row["provenance_error"] = f"{type(e).__name__}: {e}"
if devices[0].platform != "gpu" and not smoke:
    row["error"] = "JAX sees no GPU (set GPU_SUITE_SMOKE=1 for a CPU check)"
print(json.dumps(row))
sys.exit(1 if "error" in row else 0)
EOF
then
  [ -s "$work/start.json" ] && line "$(cat "$work/start.json")"
  tail -5 "$LOGS/start.err"
  line "{\"bench\": \"suite\", \"error\": \"start check failed (logs/start.err)\"}"
  exit 1
fi
line "$(cat "$work/start.json")"

quiet() { grep --line-buffered -v "^Failed to import "; }  # MJX's notes that warp is absent (not needed: impl jax)
left() { local s=$((JAXRL_BENCH_DEADLINE - $(date +%s))); echo $((s > 1 ? s : 1)); }  # timeout 0 = none
declare -A procs=()  # pid of each benchmark's `timeout` (which passes a TERM on to its python) -> its name
cleanup() { for pid in "${!procs[@]}"; do kill "$pid" 2>/dev/null; done; }
trap 'cleanup; exit 143' TERM INT HUP
if [[ " $PARTS " == *" t1 "* ]]; then
  timeout -k 10 "$(left)" "$PY" bench/massive.py --config fasttd3_playground --agents fasttd3 \
    --envs locomotion/T1JoystickFlatTerrain "${T1_ARGS[@]}" --out "$RESULTS" > >(quiet) 2> "$LOGS/massive_t1.err" &
  procs[$!]=massive_t1
fi
if [[ " $PARTS " == *" throughput "* ]]; then
  queue=$work/queue
  : > "$queue"
  for n in $NUM_ENVS; do for a in $AGENTS; do echo "$a $n" >> "$queue"; done; done
  tasks=$(wc -l < "$queue")
  for ((j = 1; j <= (JOBS < tasks ? JOBS : tasks); j++)); do
    timeout -k 10 "$(left)" "$PY" bench/throughput.py --queue "$queue" --env "$ENV" "${TP_ARGS[@]}" \
      --min-seconds-left 30 --out "$RESULTS" > >(quiet) 2> "$LOGS/throughput_$j.err" &
    procs[$!]=throughput_$j
  done
fi
# Part "brax": the update alone, then training, one process after the other. A function in a subshell of its own,
# so that a TERM from cleanup reaches the running `timeout`, and the first failure is the part's exit status.
brax_part() {
  local rc=0 child=""
  trap 'kill "$child" 2>/dev/null; exit 143' TERM
  timeout -k 10 "$(left)" "$PY" bench/sac_vs_brax.py --updates-only --envs "$BRAX_ENV" "${BRAX_UPDATE_ARGS[@]}" \
    --out "$brax_results" &
  child=$!
  wait "$child" || rc=$?
  timeout -k 10 "$(left)" "$PY" bench/sac_vs_brax.py --envs "$BRAX_ENV" --num-envs "${brax_num_envs[@]}" \
    "${BRAX_TRAIN_ARGS[@]}" --out "$brax_results" &
  child=$!
  wait "$child" || { local second=$?; [ "$rc" = 0 ] && rc=$second; }
  return "$rc"
}
if [[ " $PARTS " == *" brax "* ]]; then
  brax_results=$(dirname "$LOGS")/sac_vs_brax_gpu.jsonl
  read -r -a brax_num_envs <<< "$BRAX_NUM_ENVS"
  (brax_part) > >(quiet) 2> "$LOGS/sac_vs_brax.err" &
  procs[$!]=sac_vs_brax
fi
cq_dirs=()
cq_left=$(( $(left) > 60 ? $(left) - 40 : 1 ))  # training parts: 40 s kept for collecting their run directories
if [[ " $PARTS " == *" sac_dmc "* ]]; then
  for task in $SD_TASKS; do
    name=sac_dmc_${task//\//_}
    timeout -k 15 "$cq_left" "$PY" bench/reproduce_runs.py sac_dmc --tasks "$task" "${SD_ARGS[@]}" \
      --override run.checkpoint_minutes=0 --out "$work/reproduce_sac_dmc" > "$LOGS/$name.out" 2> "$LOGS/$name.err" &
    procs[$!]=$name
  done
fi
if [[ " $PARTS " == *" crossq "* ]]; then
  for agent in crossq sac; do
    for task in $CQ_TASKS; do
      name=crossq_vs_sac_${agent}_${task//\//_}
      cq_dirs+=("$work/runs/$name")
      timeout -k 15 "$cq_left" "$PY" bench/crossq_vs_sac.py --agent "$agent" --task "$task" "${CQ_ARGS[@]}" \
        --run-dir "$work/runs/$name" > "$LOGS/$name.out" 2> "$LOGS/$name.err" &
      procs[$!]=$name
    done
  done
fi
for pid in "${!procs[@]}"; do
  wait "$pid"
  rc=$?
  if [ "$rc" != 0 ]; then
    echo "--- ${procs[$pid]} exited $rc$([ "$rc" = 124 ] && echo ' (deadline)'); last lines of logs/${procs[$pid]}.err:"
    grep -v "^WARNING: compiler attribute\|^$" "$LOGS/${procs[$pid]}.err" | tail -4 | cut -c1-300
  fi
done

sleep 0.5  # the filters' last lines
if [[ " $PARTS " == *" sac_dmc "* ]]; then  # the runs without their checkpoints: what --report-only reads
  for dir in "$work"/reproduce_sac_dmc/runs/*/; do
    [ -s "$dir/metrics.jsonl" ] || { echo "--- $(basename "$dir"): no evaluation reached"; continue; }
    dest="$(dirname "$LOGS")/reproduce_sac_dmc/runs/$(basename "$dir")"
    mkdir -p "$dest"
    cp "$dir"/config.json "$dir"/metrics.jsonl "$dest/"
    [ -f "$dir/summary.json" ] && cp "$dir/summary.json" "$dest/"
    echo "sac_dmc $(basename "$dir"): $(tail -1 "$dir/metrics.jsonl" | cut -c1-200)"
  done
fi
if [ ${#cq_dirs[@]} -gt 0 ]; then
  reached=()
  for dir in "${cq_dirs[@]}"; do
    [ -s "$dir/metrics.jsonl" ] || { echo "--- $(basename "$dir"): no evaluation reached"; continue; }
    reached+=("$dir")
    mkdir -p "$(dirname "$LOGS")/runs/$(basename "$dir")"
    cp "$dir"/config.json "$dir"/metrics.jsonl "$(dirname "$LOGS")/runs/$(basename "$dir")/"
  done
  carried=()
  [ -f .whl/checkout.json ] && carried=(--carried-git .whl/checkout.json)
  command="$(env | grep '^GPU_SUITE_' | sort | tr '\n' ' ')bash bench/gpu_suite.sh"
  [ ${#reached[@]} -gt 0 ] && "$PY" bench/crossq_vs_sac.py --collect "${reached[@]}" "${carried[@]}" \
    --command "$command" --out "$RESULTS" > /dev/null 2> "$LOGS/crossq_collect.err"
  "$PY" bench/crossq_vs_sac.py --table "$RESULTS"
fi
if [[ " $PARTS " == *" brax "* && -s "$brax_results" ]]; then
  # The device's copy of the tree has no .git: each line's provenance takes the commit that built .whl/.
  [ -f .whl/checkout.json ] && "$PY" - "$brax_results" .whl/checkout.json <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
git = {**json.load(open(sys.argv[2])), "carried_from": "bench/gpu_carry.sh"}
for row in rows:
    if "provenance" in row and row["provenance"].get("commit") is None:
        row["provenance"]["environment"]["git"], row["provenance"]["commit"] = git, git.get("commit")
with open(sys.argv[1], "w") as f:
    f.writelines(json.dumps(row) + "\n" for row in rows)
EOF
  "$PY" bench/sac_vs_brax.py --table "$brax_results"
fi
t1_flag=()
[[ " $PARTS " == *" t1 "* ]] && t1_flag=(--t1 "$T1_NUM_ENVS")
tp_agents=()
[[ " $PARTS " == *" throughput "* ]] && read -r -a tp_agents <<< "$AGENTS"
read -r -a tp_num_envs <<< "$NUM_ENVS"
[[ " $PARTS " == *" t1 "* || " $PARTS " == *" throughput "* ]] && "$PY" bench/suite_summary.py "$RESULTS" --agents "${tp_agents[@]}" --num-envs "${tp_num_envs[@]}" --env "$ENV" \
  "${t1_flag[@]}"
line "{\"bench\": \"suite\", \"event\": \"end\", \"wall_s\": $(($(date +%s) - T0)), \"results\": \"$RESULTS\"}"
