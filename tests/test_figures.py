"""The figures of the README and the docs are what their generators print from the committed results files, typed
as the page says: a re-measured file or an edited figure cannot drift apart from the other (bench/plugin_table.py's
table is checked in tests/test_paper_plugins.py, the fingerprints in tests/test_fingerprints.py)."""
import glob
import importlib
import json
import math
import os
import re
import subprocess
import sys

import pytest

GENERATORS = [
    ["bench/defaults.py", "--table", "bench/results/defaults_before.jsonl", "bench/results/defaults_after.jsonl"],
    ["bench/defaults.py", "--table", "bench/results/defaults_brax_sac.jsonl"],
    ["bench/defaults.py", "--means", "bench/results/defaults_before.jsonl",
     "bench/results/defaults_action_repeat2.jsonl", "bench/results/defaults_action_repeat2_utd2.jsonl",
     "--agents", "sac", "td3", "--tasks", "dmc/CartpoleBalance", "dmc/PendulumSwingup", "dmc/CartpoleSwingup"],
    ["bench/pbt_vs_grid.py", "--markdown"],
    ["bench/robust_pendulum.py", "--table", "bench/results/issue33_pendulum_robust.json"],
    ["bench/default_run.py", "--readme"],
    ["bench/default_run.py", "--learning", "bench/results/learning_swingup_cpu.json"],
    ["bench/default_run.py", "--learning", "bench/results/fasttd3_cpu_balance_12k.json"],
    ["bench/default_run.py", "--learning", "bench/results/fastsac_cpu_balance_12k.json"],
    ["bench/plugin_sweeps.py", "--table", "fastsac_cpu_alpha_sweep", "fastsac_cpu_alpha_lr_sweep",
     "fastsac_cpu_delay_sweep", "fastsac_cpu_tau_sweep", "fastsac_cpu_actor_updates_sweep"],
    ["bench/test_time.py", "--readme"],
    ["bench/test_time.py", "--full", "--readme"],
    ["bench/reproduce_table.py", "bench/results/reproduce_sac_dmc.json"],
    ["bench/sac_vs_brax.py", "--table", "bench/results/sac_vs_brax.jsonl"],
    ["bench/sac_vs_brax.py", "--table", "bench/results/every_agent_speed.jsonl"],
    ["bench/sac_vs_brax.py", "--table", "bench/results/time_to_score.jsonl"],
    ["bench/compile_time.py", "--table", "bench/results/compile_time.jsonl"],
    ["bench/startup.py", "--table", "bench/results/startup_cpu.jsonl"],
    ["bench/cli_pace.py", "--table", "bench/results/cli_pace.jsonl"],
    ["bench/sac_vs_brax.py", "--table", "bench/results/sac_vs_brax_compile.jsonl"],
    ["bench/sac_vs_brax.py", "--table", "bench/results/sac_vs_brax_updates.jsonl"],
    ["bench/crossq_vs_sac.py", "--table", "bench/results/crossq_vs_sac_cpu.jsonl", "--cost",
     "bench/results/crossq_vs_sac_cpu_cost.jsonl"],
    ["bench/sweep_vs_sequential.py", "--table", "bench/results/sweep_vs_sequential.jsonl"],
    ["bench/vs_sbx.py", "--table", "bench/results/vs_sbx.jsonl"],
    ["bench/massive.py", "--readme", "bench/results/massive_cpu.jsonl"],
    ["bench/planning_throughput.py", "--table", "bench/results/planning_throughput.jsonl"],
    ["bench/suite_summary.py", "--readme", "bench/results/gpu_suite_h200.jsonl",
     "bench/results/gpu_suite_h200_1env.jsonl"],
    ["bench/playground_cost.py", "--table", "bench/results/playground_cost_cpu.jsonl"],
    ["bench/tdmpc2_cost.py", "--table", "bench/results/tdmpc2_cost.jsonl"],
    ["bench/default_run.py", "--checkpoints", "bench/results/checkpoint_cost.json"],
    ["bench/video_cost.py", "--sentence", "bench/results/video_cost.json"],
    ["bench/random_policy.py", "--sentence", "bench/results/random_policy.jsonl"],
    ["bench/dmc_physics.py", "--table", "bench/results/dmc_physics.jsonl"],
    ["bench/ace_causal_weights.py", "--sentence", "bench/results/ace_causal_weights.jsonl"],
    ["bench/dmc_draws.py", "--sentence", "bench/results/dmc_draws.jsonl"],
    ["bench/default_run.py", "--learning", "bench/results/sac_swingup_action_repeat1.json"],
    ["bench/default_run.py", "--learning", "bench/results/simbav2_swingup_narrow.json"],
    ["bench/default_run.py", "--learning", "bench/results/tdmpc2_small_swingup.json"],
]


def bench_script(repo_root, name: str):
    """A bench/ script imported as a module (bench/ is a folder of scripts, not a package)."""
    sys.path.insert(0, os.path.join(repo_root, "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def pages(repo_root) -> dict[str, str]:
    """{path: text with its whitespace runs made single spaces} of the README and every docs page (prose may wrap
    anywhere; a table's lines stay in order)."""
    paths = ["README.md"] + sorted(glob.glob("docs/**/*.md", root_dir=repo_root, recursive=True))
    return {path: " ".join(open(os.path.join(repo_root, path)).read().split()) for path in paths}


@pytest.mark.parametrize("args", GENERATORS, ids=lambda args: " ".join(args[:3]))
def test_each_figure_is_what_its_generator_prints_on_a_page_that_names_the_command(args, repo_root):
    printed = subprocess.run([sys.executable, *args], cwd=repo_root, capture_output=True, text=True,
                             check=True).stdout.strip()
    assert printed
    holding = [path for path, text in pages(repo_root).items() if " ".join(printed.split()) in text]
    assert holding, f"no page holds what {' '.join(args)} prints:\n{printed}"
    assert all(f"python {' '.join(args)}" in pages(repo_root)[path] for path in holding), holding


def test_the_default_runs_results_say_what_measured_them(repo_root):
    with open(os.path.join(repo_root, "bench", "results", "default_run.json")) as f:
        runs = json.load(f)["runs"]
    assert [r["command"] for r in runs] == ["jaxrl train", "jaxrl train --steps 100000"]
    for r in runs:
        assert r["date"] and len(r["commit"]) == 40 and r["environment"]["packages"]["jax"]
        assert r["eval_curve"][-1] == [r["env_steps"], pytest.approx(r["final_eval_return"])]


@pytest.mark.parametrize("name, commands", [
    ("learning_swingup_cpu", ["jaxrl train --config fasttd3_cpu --env dmc/CartpoleSwingup --steps 100000",
                              "jaxrl train --config fastsac_cpu --env dmc/CartpoleSwingup --steps 100000",
                              "jaxrl train --steps 100000"]),
    ("fasttd3_cpu_balance_12k", ["jaxrl train --config fasttd3_cpu --env dmc/CartpoleBalance --steps 12000 "
                                 "--eval-every 2000"]),
    ("fastsac_cpu_balance_12k", ["jaxrl train --config fastsac_cpu --env dmc/CartpoleBalance --steps 12000 "
                                 "--eval-every 2000"]),
    ("sac_swingup_action_repeat1", ["jaxrl train --env dmc/CartpoleSwingup --steps 50000 --seed 0 --action-repeat 1 "
                                    "--updates-per-step 1"]),
    ("simbav2_swingup_narrow", ["jaxrl train --agent simbav2 --env dmc/CartpoleSwingup --steps 50000 --seed 0 "
                                "--simbav2.critic-hidden-dim 128 --action-repeat 1 --updates-per-step 1"]),
    ("tdmpc2_small_swingup", ["jaxrl train --agent tdmpc2 --env dmc/CartpoleSwingup --steps 50000 --seed 0 "
                              "--num-envs 16 --tdmpc2.latent-dim 64 --tdmpc2.hidden-dim 128 --tdmpc2.encoder-dim 64 "
                              "--tdmpc2.batch-size 64 --tdmpc2.num-samples 128 --tdmpc2.num-elites 16 "
                              "--tdmpc2.num-pi-trajs 8 --tdmpc2.iterations 3 --action-repeat 1"]),
])
def test_each_learning_figures_runs_were_measured_from_a_clean_checkout_as_the_page_types_them(repo_root, name,
                                                                                                commands):
    """The learning figures of massive.md, simbav2.md and tdmpc2.md (its small model's and SAC's lines): the commands
    they type, each run stamped from a clean checkout, with a wall time for each evaluation (what ``--learning``
    reads)."""
    with open(os.path.join(repo_root, "bench", "results", f"{name}.json")) as f:
        runs = json.load(f)["runs"]
    assert [r["command"] for r in runs] == commands
    for r in runs:
        assert len(r["commit"]) == 40 and r["environment"]["git"]["uncommitted"] == 0
        assert len(r["eval_wall_s"]) == len(r["eval_curve"]) and r["eval_curve"][-1][0] == r["env_steps"]


def test_the_quick_tiers_time_says_what_measured_it(repo_root):
    with open(os.path.join(repo_root, "bench", "results", "test_time.json")) as f:
        runs = json.load(f)["runs"]
    assert [r["cache"] for r in runs] == ["empty", "warm"] and runs[0]["passed"] == runs[1]["passed"] > 0
    for r in runs:
        assert r["command"] == "python -m pytest -q -m quick -n 2" and r["date"] and len(r["commit"]) == 40
        assert r["environment"]["packages"]["jax"] and r["seconds"] > 0


@pytest.mark.parametrize("name", ["compile_time", "every_agent_speed", "time_to_score", "sac_vs_brax",
                                  "sweep_vs_sequential", "vs_sbx", "massive_cpu", "crossq_vs_sac_cpu",
                                  "crossq_vs_sac_cpu_cost", "data_parallel_cpu", "startup_cpu",
                                  "sac_vs_brax_compile", "cli_pace", "sac_vs_brax_updates", "playground_cost_cpu",
                                  "tdmpc2_cost", "random_policy", "dmc_physics", "ace_causal_weights",
                                  "dmc_draws"])
def test_each_speed_results_line_says_what_measured_it(repo_root, name):
    with open(os.path.join(repo_root, "bench", "results", f"{name}.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        stamp = row["provenance"]
        assert stamp["command"].startswith("python bench/") and stamp["date"].startswith("2026-")
        assert len(stamp["environment"]["git"]["commit"]) == 40 and stamp["environment"]["packages"]["jax"]


def test_the_reproduction_results_say_what_measured_them(repo_root):
    with open(os.path.join(repo_root, "bench", "results", "reproduce_sac_dmc.json")) as f:
        report = json.load(f)
    assert report["command"].startswith("jaxrl reproduce sac_dmc --tasks ") and report["written"]
    assert [row["task"] for row in report["rows"]] == report["tasks"]
    assert set(report["environments"]) == set(report["tasks"])
    for row in report["rows"]:
        block = report["environments"][row["task"]]
        assert len(row["returns"]) == row["seeds"] == 3 and block["git"]["commit"] and block["packages"]["jax"]


def stamped_results(repo_root) -> dict[str, dict]:
    """{name: content} of the results files that hold rows beside their stamp (the PBT table's, the plug-in
    comparison's sweeps)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(repo_root, "bench", "results", "*.json"))):
        with open(path) as f:
            content = json.load(f)
        if isinstance(content, dict) and "rows" in content and "provenance" in content:
            out[os.path.basename(path)] = content
    return out


def test_each_stamped_results_file_says_what_measured_it_and_its_rows_agree(repo_root):
    """A stamped file's rows were measured by the code its stamp names: each sweep row's own commit (the sweep's
    results.csv column) is the stamp's, and a plug-in sweep's file names the sweep file it ran."""
    stamped = stamped_results(repo_root)
    plugin_files = [os.path.basename(p) for p in glob.glob(os.path.join(repo_root, "bench", "results", "*.json"))
                    if os.path.exists(p[:-5] + ".toml")]
    assert "issue35_pbt_vs_grid.json" in stamped and plugin_files and set(plugin_files) <= set(stamped)
    for name, content in stamped.items():
        stamp = content["provenance"]
        assert stamp["command"].startswith("python bench/") and re.match(r"\d{4}-\d\d-\d\d ", stamp["date"]), name
        git = stamp["environment"]["git"]
        assert len(stamp["commit"]) == 40 and stamp["environment"]["packages"]["jax"], name
        commit = stamp["commit"][:12] + ("+uncommitted" if git.get("uncommitted") else "")
        assert content["rows"] and {row["commit"] for row in content["rows"]} == {commit}, name
        if name != "issue35_pbt_vs_grid.json":
            assert content["sweep"].startswith(f"jaxrl sweep bench/results/{name[:-5]}.toml --out "), name
            # each member's evaluations (the last one its row's final return) and last logged terms, which pages
            # read (Symphony's curve, DR-SAC's robust value): kept for exactly the rows' members
            members = {row["member_id"] for row in content["rows"]}
            assert set(content["curves"]) == set(content["final_metrics"]) == members, name
            for row in content["rows"]:
                curve, final = content["curves"][row["member_id"]], float(row["final_eval_return"])
                if math.isfinite(final):
                    assert curve[-1][1] == pytest.approx(final, abs=0.01), name
                    assert content["final_metrics"][row["member_id"]]["eval/return"] == pytest.approx(final), name


def lines_after_a_clean_stamp(repo_root, name: str, options: str) -> list[dict]:
    """The lines of ``bench/results/NAME``, whose first line must be the stamp of a clean checkout running
    ``python bench/<script> OPTIONS --out bench/results/NAME`` as its page types it; the lines after it."""
    with open(os.path.join(repo_root, "bench", "results", name)) as f:
        first, *lines = [json.loads(line) for line in f]
    stamp = first["provenance"]
    assert stamp["command"] == f"python bench/{options} --out bench/results/{name}"
    assert len(stamp["commit"]) == 40 and stamp["environment"]["git"]["uncommitted"] == 0
    return lines


def test_td3s_stability_lines_say_what_measured_them(repo_root):
    """docs/agents/td3.md's inverted-pendulum figures: the file's first line is the stamp of a clean checkout."""
    lines = lines_after_a_clean_stamp(repo_root, "td3_stability_normalize_obs.jsonl",
                                      "td3_stability.py --normalize-obs")
    assert [line["step"] for line in lines[:-1]] == list(range(1000, 30_001, 1000)) and lines[-1]["normalize_obs"]


def test_sbxs_td3_lines_say_what_measured_them_and_with_which_stack(repo_root):
    """docs/agents/td3.md's SBX figures: the stamp of a clean checkout, then SBX's own versions, then a line per
    seed."""
    stack, *seeds = lines_after_a_clean_stamp(repo_root, "td3_stability_sbx.jsonl", "td3_stability.py --sbx")
    assert stack["sbx_packages"]["sbx-rl"] and stack["sbx_packages"]["stable-baselines3"]
    assert [s["sbx_td3_seed"] for s in seeds] == [0, 1, 2] and all(len(s["eval_every_2000"]) == 10 for s in seeds)


def test_the_planning_tables_lines_say_what_measured_them(repo_root):
    """docs/agents/tdmpc2.md's planning table: the file's first line is the stamp of a clean checkout running the
    page's command, then a line per model and env count."""
    rows = lines_after_a_clean_stamp(repo_root, "planning_throughput.jsonl", "planning_throughput.py --models 5M small")
    assert [(r["model"], r["num_envs"]) for r in rows] == [(m, n) for m in ("5M", "small") for n in (1, 16, 64)]


def test_the_robustness_table_evaluates_the_policies_of_the_stamped_sweeps(repo_root):
    """docs/plugins/dr_sac.md's shifted-pendulum table: its file is stamped, and the sweeps whose final policies it
    played trained at the commits their own stamped results files record (so table and comparison rows are one run)."""
    with open(os.path.join(repo_root, "bench", "results", "issue33_pendulum_robust.json")) as f:
        content = json.load(f)
    stamp = content["provenance"]
    assert stamp["command"].startswith("python bench/robust_pendulum.py ") and len(stamp["commit"]) == 40
    assert stamp["command"].endswith(" --out bench/results/issue33_pendulum_robust.json")  # as the page types it
    assert stamp["environment"]["packages"]["jax"] and stamp["environment"]["git"]["uncommitted"] == 0
    assert [os.path.basename(d) for d in content["trained"]] == ["issue33_pendulum_sac", "issue33_pendulum_dr_sac"]
    for sweep_dir, commits in content["trained"].items():
        with open(os.path.join(repo_root, "bench", "results", os.path.basename(sweep_dir) + ".json")) as f:
            rows = json.load(f)["rows"]
        assert commits == sorted({row["commit"] for row in rows}), sweep_dir
        played = {(e["run"], e["member"]) for e in content["evaluations"] if e["dir"] == sweep_dir}
        assert len(played) == len(rows), sweep_dir  # every member's policy, once per shift
        assert len([e for e in content["evaluations"] if e["dir"] == sweep_dir]) == len(rows) * 6, sweep_dir


def test_a_learning_figure_reads_where_each_run_first_reached_the_score_and_refuses_older_files(tmp_path, repo_root):
    stamped = {"command": "jaxrl train --steps 30000", "date": "2026-12-07 15:00 UTC", "commit": "a" * 40,
               "environment": {"cpu": {"model": "Some CPU"}},
               "eval_curve": [[10_000, 5.0], [20_000, 801.0], [30_000, 790.4]], "eval_wall_s": [3.0, 6.4, 9.6]}
    (tmp_path / "f.json").write_text(json.dumps({"runs": [stamped]}))
    printed = subprocess.run([sys.executable, "bench/default_run.py", "--learning", str(tmp_path / "f.json")],
                             cwd=repo_root, capture_output=True, text=True, check=True).stdout.strip()
    assert printed == ("- `jaxrl train --steps 30000`: first ≥ 800 at 20k env steps in 6 s; 790 at 30k in 10 s "
                       "(evaluations 5, 801, 790; 2026-12-07 at aaaaaaa, Some CPU)")
    del stamped["eval_wall_s"]
    (tmp_path / "f.json").write_text(json.dumps({"runs": [stamped]}))
    done = subprocess.run([sys.executable, "bench/default_run.py", "--learning", str(tmp_path / "f.json")],
                          cwd=repo_root, capture_output=True, text=True)
    assert done.returncode != 0 and "has no evaluation wall times" in done.stderr


def test_the_whole_suites_sentence_adds_the_empty_cache_run_where_the_file_has_one(tmp_path, repo_root):
    test_time = bench_script(repo_root, "test_time")
    run = {"cache": "as an earlier run left it", "passed": 10, "skipped": 1, "seconds": 1500.4,
           "date": "2026-12-07 18:00 UTC", "commit": "c" * 40, "environment": {"cpu": {"model": "Some CPU"}}}
    (tmp_path / "one.json").write_text(json.dumps({"runs": [run]}))
    warm = ("10 tests passed (1 skipped) in 25 minutes on 2 cores with the compilation cache an earlier run left "
            "(1500 s on 2026-12-07 at ccccccc on an Some CPU; `python bench/test_time.py --full` measures it into "
            "`bench/results/test_time_full.json`")
    readme = "; `python bench/test_time.py --full --readme` prints this sentence)"
    assert test_time.full_sentence(str(tmp_path / "one.json")) == warm + readme
    empty = {**run, "cache": "empty", "seconds": 3600.0, "commit": "d" * 40}
    (tmp_path / "two.json").write_text(json.dumps({"runs": [empty, run]}))  # either order
    assert test_time.full_sentence(str(tmp_path / "two.json")) == (
        warm + "); with an empty cache, as on a new machine, 10 passed in 60 minutes (3600 s on 2026-12-07 at "
        "ddddddd; `python bench/test_time.py --full --empty-cache`" + readme)
    # measuring one kind of run again replaces that run and keeps the other
    again = {**empty, "seconds": 3000.0}
    assert test_time.replacing(str(tmp_path / "two.json"), again) == [run, again]
    assert test_time.replacing(str(tmp_path / "none.json"), again) == [again]
    done = subprocess.run([sys.executable, "bench/test_time.py", "--empty-cache", "--readme"], cwd=repo_root,
                          capture_output=True, text=True)  # as a user might type it: refused, not ignored
    assert done.returncode == 2 and "--empty-cache times the whole suite: pass it with --full" in done.stderr
    (tmp_path / "empty_only.json").write_text(json.dumps({"runs": [empty]}))
    with pytest.raises(SystemExit, match="no whole-suite run with the cache an earlier run left"):
        test_time.full_sentence(str(tmp_path / "empty_only.json"))


def test_the_planning_table_reads_batched_against_looped_per_model_and_env_count(tmp_path, repo_root):
    rows = [{"provenance": {}},
            {"num_envs": 1, "decisions_per_s_batched": 2.6, "decisions_per_s_python_loop": 2.31, "ratio": 1.13,
             "model": "5M"},
            {"num_envs": 16, "decisions_per_s_batched": 395.4, "decisions_per_s_python_loop": 214.0, "ratio": 1.85,
             "model": "small"}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    planning = bench_script(repo_root, "planning_throughput")
    assert planning.table(str(tmp_path / "p.jsonl")) == (
        "| model | 1 env | 16 envs |\n|---|---|---|\n| default 5M | 2.6 vs 2.31 (1.13×) |  |\n"
        "| small (64-wide, 128 samples, 3 iterations) |  | 395 vs 214 (1.85×) |")
    done = subprocess.run([sys.executable, "bench/planning_throughput.py", "--small", "--models", "5M"],
                          cwd=repo_root, capture_output=True, text=True)  # one model choice, not a silent winner
    assert done.returncode == 2 and "--models: not allowed with argument --small" in done.stderr


def test_a_sweeps_results_file_keeps_each_members_evaluations(tmp_path, repo_root):
    plugin_sweeps = bench_script(repo_root, "plugin_sweeps")
    member = tmp_path / "members" / "abc"
    member.mkdir(parents=True)
    (member / "metrics.csv").write_text("env_steps,eval/return,train/q,wall_s\n"
                                        "1000,,0.5,10.04\n2000,12.346,0.7,20.06\n4000,99.0,0.9,41.0\n")
    (tmp_path / "members" / "nan").mkdir()
    (tmp_path / "members" / "nan" / "metrics.csv").write_text("env_steps,eval/return,train/q,wall_s\n1000,nan,,5\n")
    curves, final = plugin_sweeps.member_metrics(str(tmp_path), [{"member_id": "abc"}, {"member_id": "nan"}])
    assert curves == {"abc": [[2000, 12.35, 20.1], [4000, 99.0, 41.0]], "nan": []}
    assert final == {"abc": {"env_steps": 4000.0, "eval/return": 99.0, "train/q": 0.9, "wall_s": 41.0},
                     "nan": {"env_steps": 1000.0, "wall_s": 5.0}}
    assert "fastsac_cpu_alpha_sweep" in plugin_sweeps.sweep_names(comparison_only=False)
    assert "fastsac_cpu_alpha_sweep" not in plugin_sweeps.sweep_names()


def test_a_sweeps_evaluation_table_has_a_row_per_member_and_a_column_per_evaluation(tmp_path, monkeypatch,
                                                                                      repo_root):
    plugin_sweeps = bench_script(repo_root, "plugin_sweeps")
    monkeypatch.setattr(plugin_sweeps, "RESULTS", str(tmp_path))

    def row(member_id, seed, swept):  # results.csv's layout: the swept values between seed and final_eval_return
        return {"member_id": member_id, "seed": seed, **swept, "final_eval_return": "0", "compile_s": "10.4",
                "run_s": "100.3", "commit": "b" * 12}

    def stamp(command, commit, cpu="Some CPU"):
        return {"command": command, "date": "2026-12-07 17:00 UTC", "commit": commit * 40,
                "environment": {"cpu": {"model": cpu}}}

    rows = [row("a", "0", {"tau": "0.1", "loop.n_step": "3"}), row("b", "0", {"tau": "0.2", "loop.n_step": "3"})]
    curves = {"a": [[2016, 10.4, 5.0], [4032, 20.6, 9.0]], "b": [[4032, -3.5, 9.0]]}  # b missed its first one
    (tmp_path / "s.json").write_text(json.dumps({"provenance": stamp("python m s", "b"), "rows": rows,
                                                 "curves": curves}))
    (tmp_path / "t.json").write_text(json.dumps({"provenance": stamp("python m t", "c", "Other CPU"),
                                                 "rows": [row("c", "1", {})], "curves": {"c": [[1500, 7.0, 1.0]]}}))
    assert plugin_sweeps.table(["s", "t"]) == (
        "| sweep | setting | seed | 1.5k | 2k | 4k | program s |\n|---|---|---|---|---|---|---|\n"
        "| s | tau=0.1 loop.n_step=3 | 0 |  | 10 | 21 | 111 |\n| s | tau=0.2 loop.n_step=3 | 0 |  |  | -4 | 111 |\n"
        "| t |  | 1 | 7 |  |  | 111 |\n\n"
        "Measured by `python m s` (`s` 2026-12-07 at bbbbbbb); `python m t` (`t` 2026-12-07 at ccccccc); Other CPU, "
        "Some CPU.")
    (tmp_path / "u.json").write_text(json.dumps({"provenance": stamp("python m u", "d"), "rows": []}))
    with pytest.raises(SystemExit, match="u.json keeps no evaluations: add them with python bench/plugin_sweeps.py "
                                         "--refresh u"):
        plugin_sweeps.table(["u"])


def test_the_plugin_table_reads_a_stamped_sweep_before_its_bare_csv_and_marks_the_bare_ones(tmp_path, monkeypatch,
                                                                                              repo_root):
    plugin_table = bench_script(repo_root, "plugin_table")
    monkeypatch.setattr(plugin_table, "RESULTS", str(tmp_path))
    (tmp_path / "a.csv").write_text("member,final_eval_return\n0,1.5\n")
    assert plugin_table.read("a") == ([{"member": "0", "final_eval_return": "1.5"}], False)
    stamped_rows = [{"member": "0", "final_eval_return": "2"}]
    (tmp_path / "a.json").write_text(json.dumps({"provenance": {}, "rows": stamped_rows}))
    assert plugin_table.read("a") == (stamped_rows, True)
    assert plugin_table.read("never_measured") is None


BESIDE = "/".join(["..", "shared"])  # the developers' notes beside the checkout, spelt so git grep finds no pointer


def test_nothing_users_get_points_outside_the_repository(repo_root):
    """The design notes beside the checkout are the developers'; a user's clone has only docs/ (docs/sources.md)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=repo_root, capture_output=True, text=True,
                             check=True).stdout.split()
    pointing = [name for name in tracked if not name.startswith("tests/") and name.endswith((".py", ".toml", ".md"))
                and (BESIDE in open(os.path.join(repo_root, name)).read()
                     or "ALGORITHMS.md" in open(os.path.join(repo_root, name)).read()
                     or "PLUGINS.md" in open(os.path.join(repo_root, name)).read())]
    assert pointing == []
    assert os.path.exists(os.path.join(repo_root, "docs", "sources.md"))


def test_startup_labels_a_tree_dirty_by_its_code_not_by_the_results_file_it_appends_to(tmp_path, repo_root):
    """bench/startup.py appends each run's line to bench/results/ of the after tree (this checkout) before it labels
    that tree: the results file alone must not make it "+changes", a changed source file must."""
    startup = bench_script(repo_root, "startup")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "startup_cpu.jsonl").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "init"], check=True)
    (tmp_path / "bench" / "results" / "startup_cpu.jsonl").write_text("{}\n{}\n")
    assert not startup.commit_of(str(tmp_path)).endswith("+changes")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert startup.commit_of(str(tmp_path)).endswith("+changes")


def test_playgrounds_cost_table_reads_imports_loads_and_compiles_and_refuses_a_non_robot(tmp_path, repo_root):
    timing = {"trace_s": 1.0, "lower_s": 0.5, "compile_s": 10.0, "total_s": 11.5}
    rows = [{"what": "import", "warp": True, "seconds": 8.31}, {"what": "import", "warp": False, "seconds": 4.73},
            {"what": "import", "warp": True, "seconds": 8.45}, {"what": "import", "warp": False, "seconds": 4.0},
            {"what": "load", "env": "locomotion/A", "seconds": 11.4}, {"what": "load", "env": "manipulation/B",
                                                                       "seconds": 0.46},
            {"what": "compile", "env": "manipulation/B", "function": "reset", **timing},
            {"what": "compile", "env": "manipulation/B", "function": "step", **timing, "total_s": 21.0}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert bench_script(repo_root, "playground_cost").table(str(tmp_path / "p.jsonl")) == (
        "| `import mujoco_playground` | runs, s | mean s |\n|---|---|---|\n"
        "| with NVIDIA Warp (`JAXRL_IMPORT_WARP=1`) | 8.3, 8.4 | 8.4 |\n"
        "| without Warp (jaxrl's import on a CPU-only JAX) | 4.7, 4.0 | 4.4 |\n\n"
        "All 2 robot tasks (`locomotion/`, `manipulation/`) load in 12 s in one process, 0.5 to 11.4 s each "
        "(slowest: `locomotion/A`).\n\n"
        "| robot | load s | `reset` compile s (trace / lower / XLA) | `step` compile s (trace / lower / XLA) |\n"
        "|---|---|---|---|\n| `manipulation/B` | 0.5 | 11.5 (1.0 / 0.5 / 10.0) | 21.0 (1.0 / 0.5 / 10.0) |")
    done = subprocess.run([sys.executable, "bench/playground_cost.py", "--robots", "dmc/CartpoleSwingup"],
                          cwd=repo_root, capture_output=True, text=True)
    assert done.returncode == 2
    assert "--robots: dmc/CartpoleSwingup not a locomotion/ or manipulation/ task" in done.stderr


def test_the_playground_cost_file_was_measured_from_a_clean_checkout_for_every_robot_task(repo_root):
    with open(os.path.join(repo_root, "bench", "results", "playground_cost_cpu.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert {r["provenance"]["command"] for r in rows} == {
        "python bench/playground_cost.py --out bench/results/playground_cost_cpu.jsonl"}
    assert all(r["provenance"]["environment"]["git"]["uncommitted"] == 0 for r in rows)
    assert len([r for r in rows if r["what"] == "load"]) == 29  # Playground 0.2's locomotion and manipulation tasks
    assert [(r["env"], r["function"]) for r in rows if r["what"] == "compile"] == [
        (robot, function) for robot in bench_script(repo_root, "playground_cost").ROBOTS for function in ("reset",
                                                                                                          "step")]


def test_the_checkpoint_sentence_reads_both_runs_and_its_file_was_measured_as_typed(tmp_path, repo_root):
    def run(command, checkpoint_s, sizes):
        return {"command": command, "date": "2026-12-07 21:00 UTC", "commit": "e" * 40, "wall_s": 270.0,
                "run_s": 200.0, "checkpoint_s": checkpoint_s, "checkpoints_mib": sizes,
                "environment": {"cpu": {"model": "Some CPU", "extensions": ["avx2"], "cores": 2},
                                "git": {"uncommitted": 0}}}
    (tmp_path / "c.json").write_text(json.dumps({"runs": [
        run("jaxrl train", 0.234, {"50080": 4.04}),
        run("jaxrl train --checkpoint-minutes 1", 0.9, {"30048": 3.3, "40064": 3.81, "50080": 4.0})]}))
    sentence = bench_script(repo_root, "default_run").checkpoint_cost(str(tmp_path / "c.json"))
    assert sentence == (
        "Measured on the default run (SAC, `dmc/CartpoleSwingup`, 50k env steps, 4.5 min): the default cadence writes "
        "one checkpoint, at the end, in 0.23 s and 4.0 MiB on disk; with `--checkpoint-minutes 1` the same run spent "
        "0.90 s writing checkpoints, 0.5 % of its 200 s of training, and kept the newest 3 (3.3, 3.8, 4.0 MiB; "
        "measured on 2026-12-07 at eeeeeee on a 2-core Some CPU without AVX-512; `python bench/default_run.py "
        f"--checkpoints {tmp_path / 'c.json'}`)")
    # a run long enough to keep several checkpoints at the default cadence, and a file without the runs: one line
    (tmp_path / "c.json").write_text(json.dumps({"runs": [
        run("jaxrl train", 0.5, {"40064": 3.2, "50080": 4.0}),
        run("jaxrl train --checkpoint-minutes 1", 0.9, {"50080": 4.0})]}))
    assert "the default cadence spent 0.50 s writing checkpoints and kept 2 (3.2, 4.0 MiB)" in \
        bench_script(repo_root, "default_run").checkpoint_cost(str(tmp_path / "c.json"))
    done = subprocess.run([sys.executable, "bench/default_run.py", "--checkpoints", "bench/results/default_run.json"],
                          cwd=repo_root, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("bench/results/default_run.json: no jaxrl train / jaxrl "
                                                           "train --checkpoint-minutes 1 run with checkpoint sizes")
    with open(os.path.join(repo_root, "bench", "results", "checkpoint_cost.json")) as f:
        runs = json.load(f)["runs"]
    assert [r["command"] for r in runs] == ["jaxrl train", "jaxrl train --checkpoint-minutes 1"]
    for r in runs:
        assert len(r["commit"]) == 40 and r["environment"]["git"]["uncommitted"] == 0 and r["checkpoint_s"] > 0
        assert max(map(int, r["checkpoints_mib"])) == r["env_steps"]  # the last checkpoint is the run's end
    # run-directories.md cites the default run's return on this file's CPU beside the ISA-capped ones
    assert f"ended the same command at {runs[0]['final_eval_return']:.2f} (the `jaxrl train` run of " \
           "`bench/results/checkpoint_cost.json`)" in pages(repo_root)["docs/guide/run-directories.md"]
    assert "avx512f" not in runs[0]["environment"]["cpu"]["extensions"]


def test_tdmpc2s_cost_sentence_reads_each_setting(tmp_path, repo_root):
    tdmpc2_cost = bench_script(repo_root, "tdmpc2_cost")
    first, reduced = tdmpc2_cost.SETTINGS
    stamp = {"date": "2026-12-07 21:00 UTC", "commit": "f" * 40,
             "environment": {"cpu": {"model": "Some CPU", "extensions": ["avx2"], "cores": 2}}}
    rows = [{"setting": first, "seeds": 3, "eval_envs": 10, "update_ms": 485.2, "plan_ms": 440.0, "provenance": stamp},
            {"setting": reduced, "seeds": 3, "eval_envs": 10, "update_ms": 20.4, "plan_ms": 9.6, "provenance": stamp}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert tdmpc2_cost.table(str(tmp_path / "t.jsonl")) == (
        "at widths 128, batch 256 and 128 samples × 3 MPPI iterations, 485 ms per update and 440 ms per planned eval "
        "step of 3 seeds × 10 envs; at bench/defaults.py's REDUCED settings, 20 ms per update and 10 ms per planned "
        "eval step of 3 seeds × 10 envs (measured on 2026-12-07 at fffffff on a 2-core Some CPU without AVX-512); at "
        "the first, a task's 20,000 updates alone take 2.7 h")
    # measured again: the newest line of each setting, and the first setting's stamp
    newer = {**stamp, "commit": "9" * 40}
    with open(tmp_path / "t.jsonl", "a") as f:
        f.write(json.dumps({**rows[0], "update_ms": 368.5, "provenance": newer}) + "\n")
    assert tdmpc2_cost.table(str(tmp_path / "t.jsonl")).startswith("at widths 128, batch 256 and 128 samples × 3 MPPI "
                                                                    "iterations, 368 ms per update")
    assert "at 9999999 on" in tdmpc2_cost.table(str(tmp_path / "t.jsonl"))


def test_the_video_figures_come_from_the_runs_last_video_line_and_file(tmp_path, repo_root):
    """bench/video_cost.py reads the last video line ``jaxrl train`` printed and draws that video's frames."""
    import numpy as np

    from jaxrl.video import write_mp4

    video_cost = bench_script(repo_root, "video_cost")
    frames = [np.full((16, 32, 3), k % 256, np.uint8) for k in range(401)]
    write_mp4(str(tmp_path / "videos" / "50080.mp4"), frames, 50.0)
    from experiments.train import video_note

    def line(path, count, ret, rollout_s, render_s, encode_s):  # as a run prints it
        return video_note({"path": path, "frames": [None] * count, "width": 32, "height": 16, "return": ret,
                           "rollout_s": rollout_s, "render_s": render_s, "encode_s": encode_s})

    output = [line("runs/x/videos/10016.mp4", 5, 1.0, 1.0, 1.0, 1.0), "env_steps 50080/50080",
              line("runs/x/videos/150080.mp4", 401, 1.0, 1.0, 1.0, 1.0),  # another video's name ends the same
              line("runs/x/videos/50080.mp4", 401, 744.3, 13.6, 17.5, 1.2)]
    found = video_cost.final_video(str(tmp_path), output)
    image = found.pop("image")
    assert found == {"video": {"file": "50080.mp4", "frames": 401, "width": 32, "height": 16, "return": 744.3,
                               "rollout_s": 13.6, "render_s": 17.5, "encode_s": 1.2, "image_frames": [0, 100, 400]}}
    assert image.shape == (16, 96, 3)  # frames 0, 100 and 400 side by side (H.264 keeps flat grey within a level)
    assert [int(image[8, 16 + 32 * k, 0]) for k in range(3)] == pytest.approx([0, 100, 144], abs=3)
    run = {"date": "2026-12-07 21:00 UTC", "commit": "b" * 40,
           "environment": {"cpu": {"model": "Some CPU", "extensions": ["avx512f"], "cores": 2},
                           "git": {"uncommitted": 1}}, **found}
    (tmp_path / "v.json").write_text(json.dumps({"runs": [run]}))
    assert video_cost.sentence(str(tmp_path / "v.json")) == (
        "Frames 0, 100 and 400 of the final video of the README's first command with `--video-every 50000` (SAC on "
        "`dmc/CartpoleSwingup`, return 744). That video (401 frames, 32x16) cost 32 s: rollout 13.6 s (its program's "
        "compile included), rendering 17.5 s, encoding 1.2 s, on top of the run's training time (measured on "
        "2026-12-07 at bbbbbbb with 1 uncommitted file on a 2-core Some CPU with AVX-512; `python bench/video_cost.py "
        f"--out {tmp_path / 'v.json'}` draws the image and keeps these figures)")
    with pytest.raises(SystemExit, match="not a results file of bench/video_cost.py"):
        video_cost.sentence(str(tmp_path / "none.json"))


def test_the_causal_weight_comparisons_words_read_each_line(tmp_path, repo_root):
    stamp = {"date": "2026-12-07 21:00 UTC", "commit": "a" * 40,
             "environment": {"cpu": {"model": "Some CPU", "extensions": ["avx512f"], "cores": 2}}}
    rows = [{"kind": "synthetic", "env": None, "samples": 10_000, "action_size": 3, "w_ridge": [1.8851, 0.4211, 0.6941],
             "w_lingam": [1.886, 0.42, 0.694], "beta_lingam": [1.0, -0.5, 0.0], "max_w_difference": 0.00118,
             "reward_position": 8, "order_length": 8, "lingam_s": 1.04, "provenance": stamp},
            {"kind": "env", "env": "dmc/CheetahRun", "samples": 10_000, "action_size": 6, "w_ridge": [1.0003] * 6,
             "w_lingam": [1.0] * 6, "beta_lingam": [0.0] * 6, "max_w_difference": 0.0003, "reward_position": 3,
             "order_length": 24, "lingam_s": 8.96, "provenance": stamp}]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert bench_script(repo_root, "ace_causal_weights").sentence(str(tmp_path / "a.jsonl")) == (
        "on the synthetic case with a known answer (`--synthetic`: beta (1, -0.5, 0)) both give w = (1.885, 0.421, "
        "0.694) to 0.0012; on 10k uniform-random transitions of `dmc/CheetahRun` (6 actions) both give w = 1 within "
        "0.0003 (DirectLiNGAM's reward row is 0: it orders the reward third of 24). DirectLiNGAM took 1.0 to 9.0 s on "
        "the host per estimate; the ridge runs inside the program (measured on 2026-12-07 at aaaaaaa on a 2-core Some "
        f"CPU with AVX-512; `python bench/ace_causal_weights.py --sentence {tmp_path / 'a.jsonl'}`)")


def test_the_random_policys_words_and_the_finger_physics_table_read_their_lines(tmp_path, repo_root):
    stamp = {"date": "2026-12-07 21:00 UTC", "commit": "d" * 40,
             "environment": {"cpu": {"model": "Some CPU", "extensions": ["avx2"], "cores": 2}}}
    rows = [{"env": "dmc/BallInCupPlayground", "episodes": 64, "mean": 3.0, "provenance": stamp},
            {"env": "dmc/BallInCupPlayground", "episodes": 64, "mean": 0.0, "provenance": stamp},  # measured again
            {"env": "dmc/BallInCup", "episodes": 64, "mean": 90.625, "provenance": stamp}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    printed = subprocess.run([sys.executable, "bench/random_policy.py", "--sentence", str(tmp_path / "r.jsonl")],
                             cwd=repo_root, capture_output=True, text=True, check=True).stdout.strip()
    assert printed == ("a random policy collects 0.0 on `dmc/BallInCupPlayground` and 90.6 on `dmc/BallInCup`, on "
                       "average over 64 episodes each (measured on 2026-12-07 at ddddddd on a 2-core Some CPU without "
                       f"AVX-512; `python bench/random_policy.py --sentence {tmp_path / 'r.jsonl'}`)")
    (tmp_path / "empty.jsonl").write_text("")
    done = subprocess.run([sys.executable, "bench/random_policy.py", "--sentence", str(tmp_path / "empty.jsonl")],
                          cwd=repo_root, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip() == f"{tmp_path / 'empty.jsonl'}: empty results file"
    row = {"simulator": "MJX", "options": "Playground", "mean_abs_velocity": 0.8123, "fraction_above_5": 0.0551,
           "max": 23.84, "return_mean": 1.2, "return_sem": 0.46}
    dmc_physics = bench_script(repo_root, "dmc_physics")
    assert dmc_physics.table([row]) == (
        "| simulator | options | mean abs velocity | fraction above 5 | max | random-policy return / 1000 steps |\n"
        "|---|---|---|---|---|---|\n| MJX | Playground | 0.81 | 0.055 | 23.8 | 1.2 ± 0.5 |")


def test_each_learning_curve_image_is_drawn_from_committed_results_files_by_the_command_its_page_names(tmp_path,
                                                                                                       repo_root):
    drawn = {match for text in pages(repo_root).values()
             for match in re.findall(r"python bench/plot_results\.py ([^`]+?) --out (docs/\S+\.png)", text)}
    assert {out for _, out in drawn} == {"docs/plot_plugins_swingup.png", "docs/plot_symphony_swingup.png",
                                         "docs/plot_ace_finger.png"}
    for names, out in drawn:
        assert os.path.exists(os.path.join(repo_root, out))
        for name in names.split():
            with open(os.path.join(repo_root, "bench", "results", f"{name}.json")) as f:
                assert len(json.load(f)["curves"]) == 3, name  # 3 seeds' evaluations
    names, _ = sorted(drawn)[-1]
    done = subprocess.run([sys.executable, "bench/plot_results.py", *names.split(), "--out", str(tmp_path / "f.png")],
                          cwd=repo_root, capture_output=True, text=True, check=True)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert done.stdout.strip() == str(tmp_path / "f.png")
    done = subprocess.run([sys.executable, "bench/plot_results.py", "nope", "--out", str(tmp_path / "g.png")],
                          cwd=repo_root, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == "nope: no bench/results/nope.json (a stamped sweep's results file)"


def test_the_draws_words_read_acceptance_agreement_and_the_budgets_passes(tmp_path, repo_root):
    stamp = {"date": "2026-12-07 21:00 UTC", "commit": "c" * 40,
             "environment": {"cpu": {"model": "Some CPU", "extensions": [], "cores": 2}}}
    rows = [{"task": "BallInCup", "draws": 4096, "accepted": 0.826, "fallback_probability": 0.174 ** 16,
             "mjx_agrees": 4096, "budget_passes_touching": 0.0, "provenance": stamp},
            {"task": "HumanoidStand", "draws": 4096, "accepted": 0.735, "fallback_probability": 0.265 ** 16,
             "mjx_agrees": 4095, "budget_passes_touching": 0.0071, "provenance": stamp}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert bench_script(repo_root, "dmc_draws").sentence(str(tmp_path / "d.jsonl")) == (
        "Measured p (4,096 draws each): BallInCup 0.826, HumanoidStand 0.735, so the fallback's probability is at most "
        "6e-10 per episode. The contact check runs on the model without Playground's contact budget (`max_geom_pairs` "
        "culls pairs by bounding sphere before the narrow phase; with it, MJX passed 0.7 % of the HumanoidStand draws "
        "MuJoCo C finds in contact); without it, MJX's verdict agreed with MuJoCo C's `ncon` on 4,096 of the 4,096 "
        "BallInCup draws, 4,095 of the 4,096 HumanoidStand draws (measured on 2026-12-07 at ccccccc on a 2-core Some "
        f"CPU without AVX-512; `python bench/dmc_draws.py --sentence {tmp_path / 'd.jsonl'}`).")


@pytest.mark.parametrize("name, commands", [
    ("tdmpc2_cost.jsonl", ["python bench/tdmpc2_cost.py --out bench/results/tdmpc2_cost.jsonl"]),
    ("random_policy.jsonl", ["python bench/random_policy.py dmc/BallInCupPlayground dmc/BallInCup --out "
                             "bench/results/random_policy.jsonl"]),
    ("dmc_physics.jsonl", ["python bench/dmc_physics.py --out bench/results/dmc_physics.jsonl"]),
    ("dmc_draws.jsonl", ["python bench/dmc_draws.py --out bench/results/dmc_draws.jsonl"]),
    ("ace_causal_weights.jsonl", [f"python bench/ace_causal_weights.py {case} --out "
                                  "bench/results/ace_causal_weights.jsonl"
                                  for case in ("--synthetic", "--env dmc/FingerSpin", "--env dmc/CheetahRun")])])
def test_each_new_results_files_lines_come_from_a_clean_checkout_running_the_command_its_page_types(repo_root, name,
                                                                                                     commands):
    with open(os.path.join(repo_root, "bench", "results", name)) as f:
        stamps = [json.loads(line)["provenance"] for line in f]
    assert sorted({s["command"] for s in stamps}) == sorted(commands)
    assert all(s["environment"]["git"]["uncommitted"] == 0 and len(s["commit"]) == 40 for s in stamps)
    if name != "ace_causal_weights.jsonl":  # ace.md types its three commands as one, with F for the file
        text = " ".join(pages(repo_root).values())
        assert all(command in text for command in commands), name


def test_the_video_figures_file_was_measured_from_a_clean_checkout(repo_root):
    with open(os.path.join(repo_root, "bench", "results", "video_cost.json")) as f:
        (run,) = json.load(f)["runs"]
    assert run["command"] == "jaxrl train --video-every 50000" and len(run["commit"]) == 40
    assert run["environment"]["git"]["uncommitted"] == 0 and run["video"]["frames"] > max(run["video"]["image_frames"])
