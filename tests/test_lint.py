"""The code style and static checks configured in pyproject.toml ([tool.ruff]) hold for the whole repository."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_check_passes():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", ROOT],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_quick_tier_holds_every_file_and_test_it_names(repo_root):
    """`pytest -m quick` (tests/conftest.py): a renamed test or file would drop out of the tier without a word."""
    from tests.conftest import QUICK_FILES, QUICK_TESTS

    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "quick"],
                         cwd=repo_root, capture_output=True, text=True, timeout=300).stdout
    collected = {line.split("::", 1)[0].removeprefix("tests/") for line in out.splitlines() if "::" in line}
    assert QUICK_FILES <= collected, sorted(QUICK_FILES - collected)
    for name in QUICK_TESTS:
        assert f"tests/{name}" in out, name
