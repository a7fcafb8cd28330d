"""The documentation site builds in strict mode: a broken link or a missing API reference fails the build."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mkdocs_build(root, site_dir):
    mkdocs = os.path.join(os.path.dirname(sys.executable), "mkdocs")
    if not os.path.exists(mkdocs):
        pytest.fail("mkdocs is not installed: the test extra installs the docs extra (uv sync --extra test)")
    return subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(site_dir)], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)


def copy_site_sources(destination):
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(os.path.join(ROOT, name), destination)
    shutil.copytree(os.path.join(ROOT, "docs"), os.path.join(destination, "docs"))
    for package in ("jaxrl", "envs", "agents"):  # what the API reference pages import
        os.symlink(os.path.join(ROOT, package), os.path.join(destination, package))


def test_the_site_builds_in_strict_mode_with_every_page_and_reference(tmp_path):
    result = mkdocs_build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    for page in ("index.html", "getting-started/index.html", "api/agent/index.html", "changelog/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    api = (tmp_path / "site" / "api" / "agent" / "index.html").read_text()
    assert "check_config_type" in api  # the reference holds the module's functions, from their docstrings
    assert "Changelog" in (tmp_path / "site" / "changelog" / "index.html").read_text()
    sac_page = (tmp_path / "site" / "agents" / "sac" / "index.html").read_text()
    assert "target_update_period" in sac_page and "arXiv 1812.05905 Table 1" in sac_page  # generated from the code


def test_the_defaults_table_is_the_configs_fields_with_their_docstrings_and_official_values(monkeypatch):
    import dataclasses
    import types

    sys.path.insert(0, os.path.join(ROOT, "docs"))
    import hooks

    from agents import sac

    table = hooks.config_table("agents.sac").splitlines()
    assert len(table) == 2 + len(dataclasses.fields(sac.Config))
    row = next(line for line in table if line.startswith("| `actor_lr` |"))
    assert row == "| `actor_lr` | `0.0003` | Adam learning rate of the actor | `0.0003` (arXiv 1812.05905 Table 1) |"
    assert "| `critic_dropout` | `0.0` | dropout rate after each hidden Dense" in "\n".join(table)
    fake = types.ModuleType("fake_agent")
    fake.Config, fake.OFFICIAL = sac.Config, {"no_such_field": (1, "nowhere")}
    monkeypatch.setitem(sys.modules, "fake_agent", fake)
    with pytest.raises(ValueError, match="fake_agent.OFFICIAL names fields its Config lacks: no_such_field"):
        hooks.config_table("fake_agent")


@pytest.mark.parametrize("breakage", ["link", "reference"])
def test_a_broken_link_or_reference_fails_the_build(tmp_path, breakage):
    copy_site_sources(tmp_path)
    page = tmp_path / "docs" / "getting-started.md"
    text = {"link": "See [nowhere](no-such-page.md).", "reference": "::: jaxrl.no_such_module"}[breakage]
    page.write_text(page.read_text() + "\n" + text + "\n")
    result = mkdocs_build(tmp_path, tmp_path / "site")
    assert result.returncode != 0
    assert ("no-such-page.md" if breakage == "link" else "no_such_module") in result.stderr
