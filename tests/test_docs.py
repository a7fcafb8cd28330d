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


@pytest.mark.parametrize("breakage", ["link", "reference"])
def test_a_broken_link_or_reference_fails_the_build(tmp_path, breakage):
    copy_site_sources(tmp_path)
    page = tmp_path / "docs" / "getting-started.md"
    text = {"link": "See [nowhere](no-such-page.md).", "reference": "::: jaxrl.no_such_module"}[breakage]
    page.write_text(page.read_text() + "\n" + text + "\n")
    result = mkdocs_build(tmp_path, tmp_path / "site")
    assert result.returncode != 0
    assert ("no-such-page.md" if breakage == "link" else "no_such_module") in result.stderr
