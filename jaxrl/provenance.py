"""What produced a number: the stack, the checkout, the machine and the settings that change numerics.

``environment()`` is the block every run's ``config.json`` records (``environment``), ``jaxrl info`` prints and the
bench scripts write beside their figures; ``differences(old, new)`` names what changed between two blocks in
words (a resume under another stack says it; ``jaxrl plot`` says when the runs it compares differ).

XLA's results are bitwise repeatable only for the same program, library versions and hardware: its CPU code is
generated for the host's instruction set, so the CPU model and its vector extensions are part of the block.

Nothing here raises: a missing git binary, a checkout that is not one, an unreadable lock, a device that cannot be
queried each become a value in the block that says so.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

# The libraries whose versions change a run's numbers (jaxrl's own code is the commit).
PACKAGES = ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint", "brax", "mujoco", "mujoco-mjx",
            "playground", "numpy")
# Environment variables that change numerics or determinism (XLA_FLAGS carries --xla_gpu_deterministic_ops).
NUMERICS_VARIABLES = ("XLA_FLAGS", "JAX_DEFAULT_MATMUL_PRECISION", "JAX_ENABLE_X64", "JAX_DEFAULT_PRNG_IMPL",
                      "JAX_THREEFRY_PARTITIONABLE", "JAX_PLATFORMS", "TF_CUDNN_DETERMINISTIC",
                      "CUBLAS_WORKSPACE_CONFIG", "OPENBLAS_CORETYPE")
# JAX's own settings with the same effect, which code (not only the environment) can set.
JAX_NUMERICS = ("jax_default_matmul_precision", "jax_enable_x64", "jax_default_prng_impl",
                "jax_threefry_partitionable")
# The vector extensions XLA's CPU code generator chooses kernels by (x86 and Arm names as /proc/cpuinfo has them).
CPU_EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                  "avx512_fp16", "amx_tile", "asimd", "sve", "sve2")
CPU_IDENTITY = ("model", "id", "extensions")  # what tells two CPUs' XLA code apart
# The checkout holding this package (jaxrl/ sits at its top level); an installed copy has none.
CHECKOUT = Path(__file__).resolve().parent.parent
LOCK_FILE = "uv.lock"
SOURCE_SUFFIXES = (".py", ".toml")
# A virtual environment's own tools (venv seeds pip and setuptools; uv installs from the lock): not the stack.
VENV_TOOLS = ("pip", "setuptools", "wheel", "uv")
ENGINE_PACKAGES = ("jaxrl", "agents", "envs", "experiments")  # jaxrl's own code: the commit names it
UPGRADE_LOCK = ".venv/bin/uv lock --upgrade && .venv/bin/uv sync --locked --inexact --extra test"


def environment(devices: bool = True) -> dict[str, Any]:
    """The block: Python, package versions, git state, the lock, platform, CPU, devices and numerics settings.
    ``devices=False`` leaves out what needs JAX's backend (initialising it fixes XLA_FLAGS for the process)."""
    block = {"python": platform.python_version(), "packages": package_versions(), "jaxrl": _version("jaxrl"),
             "git": git_state(), "lock": lock_state(), "platform": platform.platform(), "cpu": cpu()}
    if devices:
        block["devices"] = device_info()
    block["variables"] = {name: os.environ[name] for name in NUMERICS_VARIABLES if name in os.environ}
    block["jax_config"] = _jax_numerics()
    return block


def plugin_code(spec: str) -> dict[str, Any] | None:
    """What a plug-in agent (``module:ATTR``) runs that neither the commit of jaxrl's own packages nor the installed
    packages pin: its module's source and, found through its ``import`` statements (those inside functions too),
    every module it imports whose file is neither installed (standard library, site-packages) nor in jaxrl's own
    packages (``ENGINE_PACKAGES``), except those in the plug-in's own folder. ``{"module", "modules", "sha256"}``
    (a hash of each module's name and bytes, so the same code hashes alike wherever it lies); None for a built-in
    agent (the fingerprints track those) and for a module without a source file. A sweep member's id and a resumed
    run's check include it: an edited plug-in is never a relabelled old result."""
    import ast
    import importlib.util
    import sysconfig

    def source_file(name: str) -> Path | None:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if origin is None:
            try:
                found = importlib.util.find_spec(name)
            except (ImportError, ValueError, AttributeError):
                return None
            origin = found.origin if found is not None else None
        return Path(origin).resolve() if origin and origin.endswith(".py") else None

    module_name, sep, _ = spec.partition(":")
    root_file = source_file(module_name) if sep else None
    if root_file is None:
        return None
    root_dir = root_file.parent
    installed = {Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
                 if (p := sysconfig.get_paths().get(key))}
    installed |= {Path(p).resolve() for p in sys.path if "site-packages" in p or "dist-packages" in p}
    engine = [CHECKOUT / name for name in ENGINE_PACKAGES]

    def hashed(path: Path) -> bool:
        if any(path.is_relative_to(p) for p in installed):
            return False
        own_folder = path.parent == root_dir or (root_dir != CHECKOUT and path.is_relative_to(root_dir))
        return own_folder or not any(path.is_relative_to(p) for p in engine)

    files, todo = {}, [module_name]
    while todo:
        name = todo.pop()
        path = source_file(name)
        if name in files or path is None or not (name == module_name or hashed(path)):
            continue
        source = path.read_bytes()
        files[name] = source
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(p for p in [*parts, base] if p)
                todo += [base] + [f"{base}.{alias.name}" for alias in node.names]
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name] + b"\0")
    return {"module": module_name, "modules": sorted(files), "sha256": digest.hexdigest()[:16]}


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    """``PACKAGES`` (None where not installed) and any JAX accelerator plug-in installed (jax-cuda12-plugin, ...)."""
    versions = {name: _version(name) for name in PACKAGES}
    for dist in importlib.metadata.distributions():
        name = _normal(dist.metadata["Name"] or "")
        if name.startswith(("jax-cuda", "jax-rocm", "libtpu")) and name not in versions:
            versions[name] = dist.version
    return versions


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, timeout=20,
                          check=True).stdout.strip()


def git_state() -> dict[str, Any]:
    """The checkout's commit, branch (None when detached), whether it is shallow, and its uncommitted changes
    (modified tracked files and untracked ones that .gitignore does not hide) with a hash of them, so two runs
    of the same commit tell whether they ran the same edits (untracked ``.py`` and ``.toml`` files count: a new
    plug-in or config). ``commit`` None with ``why`` where there is none."""
    try:
        top = _git("rev-parse", "--show-toplevel")
    except FileNotFoundError:
        return {"commit": None, "why": "git is not installed"}
    except subprocess.CalledProcessError as e:
        lines = (e.stderr or "").strip().splitlines()
        return {"commit": None, "why": f"not a git checkout ({lines[0] if lines else 'git rev-parse failed'})"}
    except (OSError, subprocess.SubprocessError) as e:
        return {"commit": None, "why": f"git failed ({e})"}
    if Path(top).resolve() != CHECKOUT:  # an installed copy inside some other repository
        return {"commit": None, "why": f"not a git checkout (jaxrl is installed at {CHECKOUT})"}
    try:
        commit = _git("rev-parse", "HEAD")
        branch = _git("rev-parse", "--abbrev-ref", "HEAD")
        shallow = _git("rev-parse", "--is-shallow-repository") == "true"
        status = _git("status", "--porcelain", "--untracked-files=all").splitlines()
        # Untracked sources only: outputs that .gitignore misses (a sweep's directory) are not code.
        untracked = sorted(line[3:] for line in status if line.startswith("??") and line.endswith(SOURCE_SUFFIXES))
        changed = [line[3:] for line in status if not line.startswith("??")] + untracked
        digest = hashlib.sha256(subprocess.run(["git", "-C", str(CHECKOUT), "diff", "HEAD", "--binary"],
                                               capture_output=True, timeout=60, check=True).stdout)
        for name in untracked:
            digest.update(name.encode() + b"\0" + (CHECKOUT / name).read_bytes())
    except (OSError, subprocess.SubprocessError) as e:
        return {"commit": None, "why": f"git failed ({e})"}
    return {"commit": commit, "branch": None if branch == "HEAD" else branch, "shallow": shallow,
            "uncommitted": len(changed), "uncommitted_sha256": digest.hexdigest()[:16] if changed else None}


def read_lock(path: str | Path) -> dict[str, str]:
    """{package: version} that the uv lock at ``path`` pins for this interpreter and platform (a package locked at
    several versions for several Pythons resolves by its ``resolution-markers``). Raises ValueError in one line for
    an unreadable or malformed lock."""
    from packaging.markers import InvalidMarker, Marker

    try:
        with open(path, "rb") as f:
            lock = tomllib.load(f)
        packages = lock["package"]
        pins: dict[str, str] = {}
        for entry in packages:
            name, version, source = entry["name"], entry["version"], entry["source"]
            if not (isinstance(name, str) and isinstance(version, str) and isinstance(source, dict)):
                raise TypeError(f"package entry {entry!r} needs a name, a version and a source")
            markers = entry.get("resolution-markers")
            if markers and not any(Marker(m).evaluate() for m in markers):
                continue
            if "registry" in source:  # not the project itself (editable) nor a path
                pins[_normal(name)] = version
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, InvalidMarker) as e:
        raise ValueError(f"{path} is not a readable uv lock ({type(e).__name__}: {e})") from None
    return pins


def lock_state() -> dict[str, Any] | None:
    """The checkout's lock (its hash) and every installed package whose version differs from its pin (``VENV_TOOLS``
    aside); None without a lock (an installed copy)."""
    path = CHECKOUT / LOCK_FILE
    if not path.exists():
        return None
    try:
        pins = read_lock(path)
    except ValueError as e:
        return {"file": LOCK_FILE, "error": str(e)}
    installed = {_normal(d.metadata["Name"] or ""): d.version for d in importlib.metadata.distributions()}
    differs = {name: {"locked": pins[name], "installed": version} for name, version in sorted(installed.items())
               if name in pins and pins[name] != version and name not in VENV_TOOLS}
    return {"file": LOCK_FILE, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16], "differs": differs}


def cpu() -> dict[str, Any]:
    """The CPU model, its core count and the vector extensions XLA's CPU code depends on."""
    model, flags, ids = platform.processor() or platform.machine(), set(), {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model name", "Hardware") and model in ("", platform.machine()):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                elif key in ("vendor_id", "cpu family", "model", "stepping", "CPU implementer", "CPU part"):
                    ids.setdefault(key, value.strip())
    except OSError:
        pass
    # A virtual machine may name only the brand ("AMD EPYC"): family/model/stepping tell generations apart.
    identity = " ".join(f"{k.replace('cpu ', '')} {v}" for k, v in ids.items())
    return {"model": model, "id": identity or None, "machine": platform.machine(), "cores": os.cpu_count(),
            "extensions": [f for f in CPU_EXTENSIONS if f in flags]}


def device_info() -> dict[str, Any]:
    """JAX's backend, device kind and counts (initialises the backend)."""
    try:
        import jax

        devices = jax.devices()
        return {"backend": jax.default_backend(), "kind": devices[0].device_kind, "count": len(devices),
                "processes": jax.process_count()}
    except Exception as e:  # noqa: BLE001 - a backend that fails to start is recorded, not raised
        return {"backend": None, "why": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def _jax_numerics() -> dict[str, Any]:
    if "jax" not in sys.modules:
        return {}
    import jax

    return {name: str(getattr(jax.config, name, None)) for name in JAX_NUMERICS}


def stamp(command: str | None = None) -> dict[str, Any]:
    """What a results file records beside its figures: the command that measured them (default: this process's
    own command line), the date (UTC), the commit and the whole ``environment()`` block."""
    import datetime

    block = environment()
    return {"command": command or " ".join(["python", *sys.argv]),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": block["git"].get("commit"), "environment": block}


def differences(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """What differs between two blocks, a phrase each ("jax 0.10.1 -> 0.10.2", "commit 1a2b3c4 -> 5d6e7f8", ...);
    [] for the same stack, checkout and machine. A missing block (a run made before runs recorded one) is one
    phrase: nothing can be compared."""
    if not old:
        return ["no environment recorded (the run predates jaxrl recording one)"]
    out = []
    if old.get("python") != new.get("python"):
        out.append(f"Python {old.get('python')} -> {new.get('python')}")
    packages_old, packages_new = old.get("packages") or {}, new.get("packages") or {}
    for name in sorted(set(packages_old) | set(packages_new), key=lambda n: (n not in PACKAGES, n)):
        if packages_old.get(name) != packages_new.get(name):
            out.append(f"{name} {packages_old.get(name)} -> {packages_new.get(name)}")
    git_old, git_new = old.get("git") or {}, new.get("git") or {}
    if git_old.get("commit") != git_new.get("commit"):
        out.append(f"commit {_short(git_old.get('commit'))} -> {_short(git_new.get('commit'))}")
    elif git_old.get("uncommitted_sha256") != git_new.get("uncommitted_sha256"):
        out.append(f"uncommitted changes ({_edits(git_old)} -> {_edits(git_new)})")
    code_old, code_new = old.get("agent_code"), new.get("agent_code")
    if (code_old or {}).get("sha256") != (code_new or {}).get("sha256"):
        out.append(f"plug-in code {code_text(code_old)} -> {code_text(code_new)}")
    cpu_old, cpu_new = old.get("cpu") or {}, new.get("cpu") or {}
    if [cpu_old.get(k) for k in CPU_IDENTITY] != [cpu_new.get(k) for k in CPU_IDENTITY]:
        out.append(f"CPU {_cpu_name(cpu_old)!r} -> {_cpu_name(cpu_new)!r}")
    dev_old, dev_new = old.get("devices"), new.get("devices")
    if dev_old and dev_new and _devices(dev_old) != _devices(dev_new):
        out.append(f"devices {_devices(dev_old)} -> {_devices(dev_new)}")
    for table in ("variables", "jax_config"):
        a, b = old.get(table) or {}, new.get(table) or {}
        if table == "jax_config" and (not a or not b):
            continue
        out += [f"{name}={a.get(name)!r} -> {b.get(name)!r}" for name in sorted(set(a) | set(b))
                if a.get(name) != b.get(name)]
    return out


def _cpu_name(cpu_info: dict[str, Any]) -> str:
    return f"{cpu_info.get('model')}" + (f" ({cpu_info['id']})" if cpu_info.get("id") else "")


def code_text(code: dict[str, Any] | None) -> str:
    return "not recorded" if not code else f"{code['module']} {code['sha256']} ({len(code['modules'])} module(s))"


def _short(commit: str | None) -> str:
    return commit[:10] if commit else "none"


def _edits(git: dict[str, Any]) -> str:
    return f"{git.get('uncommitted') or 0} file(s) {git.get('uncommitted_sha256') or ''}".strip()


def _devices(devices: dict[str, Any]) -> str:
    return f"{devices.get('count')} x {devices.get('kind')} ({devices.get('backend')})"


def summary_line(block: dict[str, Any] | None) -> str:
    """One line for a table or a report: commit, jax/jaxlib/mujoco versions, device and CPU."""
    if not block:
        return "no environment recorded"
    git, packages, devices = block.get("git") or {}, block.get("packages") or {}, block.get("devices") or {}
    commit = _short(git.get("commit")) + (f"+{git['uncommitted']} uncommitted" if git.get("uncommitted") else "")
    return (f"commit {commit}; Python {block.get('python')}, jax {packages.get('jax')}, jaxlib "
            f"{packages.get('jaxlib')}, mujoco {packages.get('mujoco')}, brax {packages.get('brax')}; "
            f"{_devices(devices) if devices else 'devices not recorded'}; CPU {_cpu_name(block.get('cpu') or {})}")


def format_block(block: dict[str, Any]) -> str:
    """The block as ``name: value`` lines (``jaxrl info``, the reproduction report)."""
    git = block.get("git") or {}
    if git.get("commit"):
        checkout = (f"{git['commit']} ({git.get('branch') or 'detached'}{', shallow' if git.get('shallow') else ''}"
                    f"; {git.get('uncommitted') or 0} uncommitted file(s)"
                    f"{' ' + git['uncommitted_sha256'] if git.get('uncommitted_sha256') else ''})")
    else:
        checkout = f"none ({git.get('why')})"
    lock = block.get("lock")
    if lock is None:
        lock_text = "none (not a checkout with uv.lock)"
    elif "error" in lock:
        lock_text = f"unreadable: {lock['error']}"
    elif lock.get("differs"):
        lock_text = (f"{lock['file']} {lock['sha256']}; installed versions differ: "
                     + ", ".join(f"{n} {d['installed']} (locked {d['locked']})" for n, d in lock["differs"].items()))
    else:
        lock_text = f"{lock['file']} {lock['sha256']}; every installed package matches it"
    cpu_info = block.get("cpu") or {}
    lines = [("jaxrl", block.get("jaxrl")), ("python", block.get("python")),
             *[(name, version or "not installed") for name, version in (block.get("packages") or {}).items()],
             ("commit", checkout), ("lock", lock_text), ("platform", block.get("platform")),
             ("cpu", f"{_cpu_name(cpu_info)}, {cpu_info.get('cores')} cores ("
                     f"{' '.join(cpu_info.get('extensions') or []) or 'no listed vector extensions'})")]
    if block.get("agent_code"):
        code = block["agent_code"]
        lines.append(("plug-in code", f"{code['sha256']} ({', '.join(code['modules'])})"))
    if block.get("devices"):
        devices = block["devices"]
        lines.append(("devices", _devices(devices) if devices.get("backend") else f"none ({devices.get('why')})"))
    lines.append(("variables", " ".join(f"{k}={v}" for k, v in block.get("variables", {}).items()) or "none set"))
    if block.get("jax_config"):
        lines.append(("jax config", " ".join(f"{k}={v}" for k, v in block["jax_config"].items())))
    width = max(len(name) for name, _ in lines)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in lines)
