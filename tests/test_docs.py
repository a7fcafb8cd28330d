"""The documentation site builds in strict mode: a broken link or a missing API reference fails the build; the
code blocks of the README and the docs are valid Python and jaxrl commands that parse."""
import ast
import glob
import os
import re
import shlex
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


def test_no_list_item_or_table_row_of_a_page_renders_as_paragraph_text():
    """Python-Markdown (mkdocs' renderer, with the site's extensions) nests a block in a list item only when it is
    indented 4 spaces, and starts a list only after a blank line: otherwise the next bullets or a table's rows
    render as one paragraph of literal '* ...' / '| ...' text, which the figure tests (whitespace-collapsed text)
    cannot see."""
    import markdown

    swallowed = []
    for path in ["README.md", *sorted(glob.glob("docs/**/*.md", root_dir=ROOT, recursive=True))]:
        with open(os.path.join(ROOT, path)) as f:
            html = markdown.markdown(f.read(), extensions=["tables", "admonition", "toc", "pymdownx.superfences",
                                                           "pymdownx.arithmatex"],
                                     extension_configs={"pymdownx.arithmatex": {"generic": True}})
        for paragraph in re.findall(r"<p>(.*?)</p>", html, flags=re.S):
            swallowed += [f"{path}: {line[:60]}" for line in paragraph.split("\n")
                          if re.match(r"(\* |- |\| )", re.sub(r"<[^>]+>", "", line).strip())]
    assert not swallowed, "\n".join(swallowed)


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


# ---------------------------------------------------------------------------------------- the pages' code blocks
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
PAGES = ["README.md"] + sorted(glob.glob("docs/**/*.md", root_dir=ROOT, recursive=True))


def blocks(language):
    """(page, block) for every fenced block of ``language`` in the README and the docs."""
    return [(page, body) for page in PAGES for lang, body in FENCE.findall(open(os.path.join(ROOT, page)).read())
            if lang == language]


def jaxrl_lines():
    """(page, argv after ``jaxrl``) of every jaxrl command in a bash block: continuations joined, comments and the
    other commands of a ``;`` list dropped."""
    found = []
    for page, body in blocks("bash"):
        for line in body.replace("\\\n", " ").splitlines():
            for command in line.split(" #")[0].split(";"):
                words = shlex.split(command.strip().removeprefix(".venv/bin/"))
                while words and "=" in words[0]:  # an environment assignment before the command
                    words = words[1:]
                if words[:1] == ["jaxrl"]:
                    found.append((page, words[1:]))
    return found


def test_every_python_block_of_the_docs_is_valid_python():
    found = blocks("python")
    assert len(found) >= 4
    for page, body in found:
        try:
            ast.parse(body)
        except SyntaxError as e:
            pytest.fail(f"{page}: a python block does not parse: {e}\n{body}")


def test_every_jaxrl_train_line_of_the_docs_parses_into_configs():
    """The flags, agents, configs and envs of each ``jaxrl train`` line resolve as the CLI resolves them (nothing
    trains). Lines with a placeholder (``<dir>``, ``...``) or ``--resume`` of a run the docs do not make are
    skipped; there must be real ones."""
    from experiments import cli

    checked = 0
    for page, argv in jaxrl_lines():
        if argv[:1] != ["train"] or "--resume" in argv or "--help" in argv or any(
                "<" in word or "..." in word for word in argv):
            continue
        try:
            known, rest, base = cli._resolve_train(argv[1:])
            cli._train_flags(base, rest)
        except Exception as e:  # noqa: BLE001 - the page and the line make the report
            pytest.fail(f"{page}: jaxrl {' '.join(argv)}: {e}")
        checked += 1
    assert checked >= 10


def test_every_other_jaxrl_line_of_the_docs_names_a_command_and_flags_it_has(capsys):
    from experiments import cli

    helps, checked = {}, 0
    for page, argv in jaxrl_lines():
        if argv[:1] == ["train"] or not argv:
            continue
        command = argv[0]
        if command not in helps:
            try:
                code = cli.main([command, "--help"])
            except SystemExit as stop:  # argparse's --help
                code = stop.code
            assert code == 0, f"{page}: jaxrl {command} is not a command"
            helps[command] = capsys.readouterr().out
        unknown = [word for word in argv if word.startswith("--") and word.split("=")[0] not in helps[command]]
        assert not unknown, f"{page}: jaxrl {' '.join(argv)}: {unknown} not in jaxrl {command} --help"
        checked += 1
    assert checked >= 10


# Blocks that run as written: (page, the text the block follows) -> (the file that runs it, what that file holds to
# show it: None for the text itself, which the test reads the block by). The Huber example is the file
# tests/test_cli.py trains; the README's first block is what .ci/run runs.
HUBER = "experiments/examples/sac_huber.py"
RUN_BY_TESTS = {
    ("README.md", "# jaxrl"): (".ci/run", "--locked --inexact --extra test && .venv/bin/python -m pytest -q -n 2"),
    ("README.md", "then train it by its import path"): (HUBER, "block"),
    ("docs/guide/run-directories.md", "these lines verbatim in a fresh working directory"):
        ("tests/test_user_commands.py", None),
    ("docs/plugins/index.md", "A plug-in run is a run: `tests/test_plugins.py` runs these lines"):
        ("tests/test_plugins.py", None),
    ("docs/plugins/index.md", "`tests/test_cli.py::test_plugged_in_loss_trains_from_the_cli`"): (HUBER, "block"),
    ("docs/plugins/index.md", "runs this block and one update of each agent"): ("tests/test_plugins.py", None),
    ("docs/plugins/index.md", "core of it:"): ("tests/test_plugins.py", None),
    ("docs/plugins/index.md", "## Checking a new agent before it costs GPU hours"): ("tests/test_harness.py", None),
}
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->\s*$")


def test_every_code_block_is_run_by_a_test_or_says_why_not():
    """A block is either one a test runs verbatim (``RUN_BY_TESTS``, each test reading it by that text) or comes
    after ``<!-- not run: reason -->`` on the line above it; the checks above still parse or resolve every block."""
    run_by = {}
    for (page, marker), (runner, evidence) in RUN_BY_TESTS.items():
        text = open(os.path.join(ROOT, page)).read()
        start = text.index("```", text.index(marker))
        block = FENCE.match(text, start).group(2)
        shown = {None: marker, "block": block}.get(evidence, evidence)
        assert shown in open(os.path.join(ROOT, runner)).read(), f"{runner} does not hold {page}'s block after {marker}"
        run_by[(page, start)] = runner
    unaccounted = []
    for page in PAGES:
        text = open(os.path.join(ROOT, page)).read()
        for match in FENCE.finditer(text):
            above = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if (page, match.start()) not in run_by and not NOT_RUN.search(above):
                unaccounted.append(f"{page}:{text[:match.start()].count(chr(10)) + 1}")
    assert not unaccounted, f"blocks neither run by a test nor marked <!-- not run: reason -->: {unaccounted}"


def test_the_docs_install_only_extras_the_project_has(repo_root):
    import tomllib

    with open(os.path.join(repo_root, "pyproject.toml"), "rb") as f:
        extras = set(tomllib.load(f)["project"]["optional-dependencies"])
    named = {extra for _, body in blocks("bash") for extra in re.findall(r"--extra (\w+)", body)}
    assert named and named <= extras, named - extras


def test_every_sweep_file_of_the_docs_plans(tmp_path, cli):
    """The sweep-file blocks (a TOML block with an ``agent``) plan as ``jaxrl sweep FILE --dry-run``; a fragment
    (no ``agent``) still parses as TOML."""
    import tomllib

    planned = 0
    for page, body in blocks("toml"):
        table = tomllib.loads(body)
        if "agent" in table:
            (tmp_path / "sweep.toml").write_text(body)
            result = cli("sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "out"), "--dry-run")
            assert result.returncode == 0, f"{page}: {result.stderr}"
            planned += 1
    assert planned >= 1


def test_the_changelog_keeps_its_form(repo_root):
    """Keep a Changelog: releases as ``## [name]`` (Unreleased first); under each, the breaking changes come first,
    and each entry under them says what to do."""
    text = open(os.path.join(repo_root, "CHANGELOG.md")).read()
    releases = re.split(r"(?m)^## ", text)[1:]
    assert releases and releases[0].startswith("[Unreleased]")
    for release in releases:
        assert re.match(r"\[[^\]]+\]", release), release[:40]
        sections = re.findall(r"(?m)^### (.*)$", release)
        assert sections and sections[0].startswith("Breaking"), sections
        assert set(s.split(":")[0] for s in sections) <= {"Breaking", "Added", "Changed", "Deprecated", "Removed",
                                                          "Fixed", "Security"}, sections


def test_every_agent_and_plug_in_has_a_page_with_its_generated_defaults(repo_root):
    """A page per built-in agent and per plug-in of the papers, each with the marker that docs/hooks.py turns into
    the table of its config's fields (``MODULE:CLASS`` for a plug-in with one config per base agent)."""
    sys.path.insert(0, os.path.join(ROOT, "docs"))
    import hooks

    from agents import REGISTERED

    pages = {f"agents/{name}.md": module for name, module in REGISTERED.items()}
    plugins = sorted(name[:-3] for name in os.listdir(os.path.join(repo_root, "experiments", "plugins"))
                     if name.endswith(".py") and not name.startswith("_"))
    pages.update({f"plugins/{name}.md": f"experiments.plugins.{name}" for name in plugins})
    for page, module in pages.items():
        text = open(os.path.join(repo_root, "docs", page)).read()
        markers = hooks.MARKER.findall(text)
        assert markers and all(m.split(":")[0] == module for m in markers), (page, markers)
        for marker in markers:
            assert "| `" in hooks.config_table(marker)
    td3_table = hooks.config_table("experiments.plugins.aql:TD3Config")
    assert "| `policy_delay` |" in td3_table and "| `expectile_init` | `0.9` |" in td3_table
