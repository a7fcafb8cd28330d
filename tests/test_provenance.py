"""The locked stack and what every run records of it (uv.lock, jaxrl/provenance.py, ``jaxrl info``)."""
import json
import os
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from jaxrl import provenance


def _lock(repo_root):
    with open(os.path.join(repo_root, "uv.lock"), "rb") as f:
        return tomllib.load(f)


def _extra(marker: str | None) -> str | None:
    found = re.search(r"extra == '([\w.-]+)'", marker or "")
    return found.group(1) if found else None


def test_the_lock_holds_exactly_what_pyproject_asks_for(repo_root):
    """uv.lock records the requirements it was resolved for: pyproject.toml changed without `uv lock` differs."""
    with open(os.path.join(repo_root, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    lock = _lock(repo_root)
    assert lock["requires-python"] == project["requires-python"].split("#")[0].strip()
    wanted = {(None, Requirement(r)) for r in project["dependencies"]}
    wanted |= {(extra, Requirement(r)) for extra, reqs in project["optional-dependencies"].items() for r in reqs}
    asked = {(extra, canonicalize_name(r.name), tuple(sorted(r.extras)), r.specifier) for extra, r in wanted}
    (root,) = [p for p in lock["package"] if p["name"] == project["name"]]
    locked = {(_extra(r.get("marker")), canonicalize_name(r["name"]), tuple(sorted(r.get("extras", []))),
               SpecifierSet(r.get("specifier", ""))) for r in root["metadata"]["requires-dist"]}
    assert locked == asked, ("uv.lock was resolved for other requirements than pyproject.toml's; run "
                             f"`{provenance.UPGRADE_LOCK}` (or `uv lock` to change only what changed): "
                             f"{sorted(map(str, locked ^ asked))}")
    assert sorted(root["metadata"]["provides-extras"]) == sorted(project["optional-dependencies"])
    # Every pinned version of a direct requirement is one pyproject.toml allows (for each Python the lock forks on).
    pins = {}
    for entry in lock["package"]:
        pins.setdefault(canonicalize_name(entry["name"]), []).append(Version(entry["version"]))
    for _, requirement in wanted:
        name = canonicalize_name(requirement.name)
        if name != project["name"]:
            assert pins.get(name), f"{name} is not in uv.lock"
            assert all(requirement.specifier.contains(v, prereleases=True) for v in pins[name]), (requirement,
                                                                                                  pins[name])


def test_this_environment_is_installed_from_the_lock(repo_root):
    """importlib.metadata's versions are uv.lock's pins: the suite runs on the locked stack, nothing is installed."""
    pins = provenance.read_lock(os.path.join(repo_root, "uv.lock"))
    installed = provenance.package_versions()
    for name in provenance.PACKAGES:
        assert installed[name] == pins[name], (f"{name} {installed[name]} is installed, uv.lock pins {pins[name]}: "
                                               "install with the README's command (uv sync --locked)")
    state = provenance.lock_state()
    assert state["file"] == "uv.lock" and re.fullmatch(r"[0-9a-f]{16}", state["sha256"])
    assert state["differs"] == {}, f"installed versions that are not uv.lock's: {state['differs']}"


def test_the_installed_stack_is_byte_compiled():
    """The README's install leaves a .pyc beside the stack's modules (pyproject's [tool.uv] compile-bytecode; these
    six stand for the rest): where PYTHONDONTWRITEBYTECODE is set (CI, these machines) Python writes none itself,
    and before 2026-12-06 every process compiled jax's, flax's, brax's and MuJoCo Playground's sources again at
    import (`import jax` 3.8 s instead of 1.6 on 2 cores; test_user_commands and test_rundir 217 s instead of 149)."""
    import importlib.util

    import brax
    import flax
    import jax
    import mujoco_playground
    import optax

    for module in (jax, jax.numpy, flax.linen, optax, brax, mujoco_playground):
        cached = importlib.util.cache_from_source(module.__file__)
        assert os.path.exists(cached), (f"{module.__name__} is not byte-compiled ({cached} is missing): install with "
                                        "the README's command (uv sync byte-compiles: pyproject.toml [tool.uv])")


def test_the_lock_resolves_each_package_for_the_running_python(tmp_path):
    """A package locked at two versions for two Pythons reads as the one whose resolution markers hold here."""
    path = tmp_path / "uv.lock"
    path.write_text('version = 1\nrequires-python = ">=3.11"\n'
                    '[[package]]\nname = "jax"\nversion = "0.10.2"\nsource = { registry = "https://pypi.org/simple" }\n'
                    "resolution-markers = [\"python_full_version < '3.12'\"]\n"
                    '[[package]]\nname = "jax"\nversion = "0.11.2"\nsource = { registry = "https://pypi.org/simple" }\n'
                    "resolution-markers = [\"python_full_version >= '3.12'\"]\n"
                    '[[package]]\nname = "jaxrl"\nversion = "0.1.0"\nsource = { editable = "." }\n')
    import sys

    assert provenance.read_lock(path) == {"jax": "0.10.2" if sys.version_info < (3, 12) else "0.11.2"}


@pytest.mark.parametrize("text", ["version = 1\n[[package]\n", "version = 1\n", "[[package]]\nname = 3\n"])
def test_an_unreadable_lock_is_one_line_in_the_block_and_nothing_fails(tmp_path, monkeypatch, text):
    (tmp_path / "uv.lock").write_text(text)
    with pytest.raises(ValueError, match=r"uv.lock is not a readable uv lock \(") as raised:
        provenance.read_lock(tmp_path / "uv.lock")
    assert "\n" not in str(raised.value)
    monkeypatch.setattr(provenance, "CHECKOUT", tmp_path)
    state = provenance.lock_state()
    assert state["file"] == "uv.lock" and state["error"].startswith(str(tmp_path / "uv.lock"))
    assert "unreadable: " in provenance.format_block({**provenance.environment(devices=False), "lock": state})
    (tmp_path / "uv.lock").unlink()
    assert provenance.lock_state() is None  # an installed copy: no lock


def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_git_state_of_this_checkout(repo_root):
    git = provenance.git_state()
    assert git["commit"] == _git(repo_root, "rev-parse", "HEAD")
    edits = [line for line in _git(repo_root, "status", "--porcelain", "--untracked-files=all").splitlines()
             if not line.startswith("??") or line.endswith((".py", ".toml"))]
    assert git["uncommitted"] == len(edits) and (git["uncommitted_sha256"] is None) == (not edits)


def test_shallow_detached_and_edited_checkouts_say_so(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@t"], ["config", "user.name", "t"]):
        _git(repo, *args)
    for n in range(2):
        (repo / "a.py").write_text(f"x = {n}\n")
        _git(repo, "add", "a.py")
        _git(repo, "commit", "-q", "-m", f"c{n}")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], check=True)
    _git(clone, "checkout", "-q", "--detach")
    monkeypatch.setattr(provenance, "CHECKOUT", clone)
    state = provenance.git_state()
    assert state == {"commit": _git(repo, "rev-parse", "HEAD"), "branch": None, "shallow": True, "uncommitted": 0,
                     "uncommitted_sha256": None}
    # Edits are counted and hashed, so two runs of one commit tell whether they ran the same code.
    (clone / "a.py").write_text("x = 2\n")
    (clone / "plugin.py").write_text("y = 1\n")
    (clone / "output.csv").write_text("not code\n")
    first = provenance.git_state()
    assert first["uncommitted"] == 2 and first["uncommitted_sha256"]
    (clone / "plugin.py").write_text("y = 2\n")
    second = provenance.git_state()
    assert second["uncommitted_sha256"] != first["uncommitted_sha256"]
    assert provenance.differences({"git": first}, {"git": second}) == [
        f"uncommitted changes (2 file(s) {first['uncommitted_sha256']} -> 2 file(s) {second['uncommitted_sha256']})"]


def test_no_git_binary_and_no_checkout_are_values_not_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "CHECKOUT", tmp_path)
    assert provenance.git_state()["why"].startswith("not a git checkout (")
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    assert provenance.git_state() == {"commit": None, "why": "git is not installed"}
    block = provenance.environment(devices=False)
    assert "commit            none (git is not installed)" in provenance.format_block(block)


def _block(**changes):
    block = {"python": "3.11.7", "packages": {"jax": "0.10.2", "jaxlib": "0.10.2", "mujoco": "4.0.1"},
             "git": {"commit": "a" * 40, "uncommitted": 0, "uncommitted_sha256": None},
             "cpu": {"model": "AMD EPYC", "id": "family 25 model 17", "extensions": ["avx2"]},
             "devices": {"backend": "cpu", "kind": "cpu", "count": 1}, "variables": {}, "jax_config": {}}
    for path, value in changes.items():
        table, _, key = path.partition("__")
        block[table] = {**block[table], key: value} if key else value
    return block


def test_differences_name_each_change_in_words():
    assert provenance.differences(_block(), _block()) == []
    assert provenance.differences(_block(), _block(packages__jax="0.10.1", git__commit="b" * 40, python="3.12.1")) \
        == ["Python 3.11.7 -> 3.12.1", "jax 0.10.2 -> 0.10.1", "commit aaaaaaaaaa -> bbbbbbbbbb"]
    assert provenance.differences(_block(), _block(cpu__id="family 25 model 1")) == [
        "CPU 'AMD EPYC (family 25 model 17)' -> 'AMD EPYC (family 25 model 1)'"]
    assert provenance.differences(_block(), _block(devices={"backend": "gpu", "kind": "H100", "count": 2},
                                                   variables={"XLA_FLAGS": "--x"})) == [
        "devices 1 x cpu (cpu) -> 2 x H100 (gpu)", "XLA_FLAGS=None -> '--x'"]
    assert provenance.differences(None, _block()) == [
        "no environment recorded (the run predates jaxrl recording one)"]


def test_jaxrl_info_prints_the_block_of_this_install(cli, repo_root):
    result = cli("info")
    assert result.returncode == 0, result.stderr
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in result.stdout.strip().splitlines())
    import importlib.metadata

    for name in provenance.PACKAGES:
        assert lines[name] == importlib.metadata.version(name)
    assert lines["commit"].startswith(_git(repo_root, "rev-parse", "HEAD"))
    assert lines["lock"].endswith("every installed package matches it") and lines["devices"] == "1 x cpu (cpu)"
    for name in ("python", "platform", "cpu", "variables"):
        assert lines[name]
    block = json.loads(cli("info", "--json").stdout)
    assert block["packages"] == provenance.package_versions() and block["git"]["commit"] == lines["commit"][:40]


def test_bench_results_lines_carry_the_stamp_and_printed_lines_stay_short(tmp_path, repo_root, capsys, monkeypatch):
    """bench/devtime.py's emit (massive.py, throughput.py): the file says what measured it, stdout does not grow."""
    monkeypatch.syspath_prepend(os.path.join(repo_root, "bench"))
    import devtime

    out = tmp_path / "rows.jsonl"
    devtime.emit({"agent": "sac", "train_env_steps_per_s": 1.0}, str(out))
    devtime.emit({"agent": "td3", "train_env_steps_per_s": 2.0}, None)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [{"agent": "sac", "train_env_steps_per_s": 1.0}, {"agent": "td3", "train_env_steps_per_s": 2.0}]
    (line,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert line["agent"] == "sac" and line["provenance"]["commit"] == provenance.git_state()["commit"]
    assert line["provenance"]["environment"]["packages"]["jax"] and line["provenance"]["date"]


def test_the_gpu_suites_first_row_records_the_carried_checkout(tmp_path, repo_root):
    """The device gets a copy of the tree without .git: the commit comes from .whl/checkout.json (gpu_carry.sh)."""
    script = open(os.path.join(repo_root, "bench", "gpu_suite.sh")).read()
    start_check = script.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    copy = tmp_path / "tree"
    files = subprocess.run(["git", "ls-files", "jaxrl", "pyproject.toml", "uv.lock"], cwd=repo_root,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(open(os.path.join(repo_root, name), "rb").read())
    carried = {"commit": "f" * 40, "branch": "main", "shallow": False, "uncommitted": 0, "uncommitted_sha256": None}
    (copy / ".whl").mkdir()
    (copy / ".whl" / "checkout.json").write_text(json.dumps(carried))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"GPU_SUITE_SMOKE": "1"}
    out = subprocess.run([sys.executable, "-", "1", "480", "8", "0"], input=start_check, cwd=copy, env=env,
                         capture_output=True, text=True, check=True).stdout
    row = json.loads(out)
    assert "provenance_error" not in row, row.get("provenance_error")
    stamp = row["provenance"]
    assert stamp["command"] == "GPU_SUITE_SMOKE=1 bash bench/gpu_suite.sh" and stamp["commit"] == "f" * 40
    assert stamp["environment"]["git"] == {**carried, "carried_from": "bench/gpu_carry.sh"}
