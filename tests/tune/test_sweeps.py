"""Sweep definitions without Ray: typed settings and their errors, seeded draws, the resources
a trial declares, and where the compute-allocation sweep branches GRPO off BC."""

import json

import pandas as pd
import pytest

from envs.registry import EnvError
from training.config import ConfigError
from tune.sweeps import SWEEPS, make_sweep, trial_cpus
from tune.sweeps.compute_allocation import FRACTIONS, GRPO_SPACE


def test_every_sweep_builds_with_its_defaults():
    for name in SWEEPS:
        sweep = make_sweep(name)
        assert sweep.stage_names


@pytest.mark.parametrize(
    "name, values, message",
    [
        (
            "nope",
            {},
            "unknown sweep 'nope'; sweeps: seeds, sensitivity, compute_allocation, hypermarl",
        ),
        ("hypermarl", {"methods": ["FuPS", "IPS"]}, "distinct methods of FuPS, FuPS\\+ID"),
        ("hypermarl", {"timesteps": 0}, "timesteps=0"),
        ("hypermarl", {"settings": {"hyper.embedding_dim": 0}}, "hyper.embedding_dim=0"),
        ("seeds", {"seedz": 3}, "unknown key 'seedz'; allowed: env, algo"),
        ("seeds", {"samples": "five"}, "samples must be int, got .five."),
        ("seeds", {"samples": 0}, "samples=0"),
        ("seeds", {"env": "smac/4m_vs_99m-v0"}, "4m_vs_99m"),
        ("seeds", {"settings": {"lrr": 1}}, "unknown config key 'lrr'"),
        ("sensitivity", {"space": {"lr": []}}, "non-empty lists"),
        ("sensitivity", {"reduction_factor": 1}, "reduction_factor=1"),
        ("compute_allocation", {"fractions": [0, 1.5]}, "fractions must lie in"),
        ("compute_allocation", {"fractions": [1.0]}, "one at least below 1"),
        ("compute_allocation", {"space": {"lr": [1e-3, -1.0]}}, "lr=-1"),
        ("compute_allocation", {"space": {"temperature": [-1.0]}}, "temperature=-1"),
        ("compute_allocation", {"teacher_ratio": 0}, "teacher_ratio=0.0 (a finite multiple"),
        (
            "compute_allocation",
            {"bc": {"teacher_params": 7e10}},
            "bc sets teacher_params; the sweep prices the teacher with its own teacher_ratio",
        ),
    ],
)
def test_bad_settings_are_refused_with_what_is_allowed(name, values, message):
    with pytest.raises((ConfigError, EnvError), match=message.replace("(", r"\(")):
        make_sweep(name, values)


def test_sensitivity_draws_are_seeded_and_keep_to_the_algorithm():
    a = make_sweep("sensitivity", {"samples": 6, "seed": 3})
    assert a.configs() == make_sweep("sensitivity", {"samples": 6, "seed": 3}).configs()
    assert a.configs() != make_sweep("sensitivity", {"samples": 6, "seed": 4}).configs()
    assert set(a.search_space()) == {"lr", "gamma", "entropy_coeff", "clip_param", "num_epochs"}
    stage = a.stage("search", None, None, None)
    assert stage.asha.max_t == a.iterations and len(stage.trials) == 6
    assert stage.trials[0]["run"]["lr"] == a.configs()[0]["lr"]


def test_seeds_sweep_runs_one_trial_per_seed():
    sweep = make_sweep("seeds", {"samples": 5, "settings": {"train_batch_size": 1000}})
    trials = sweep.stage("train", None, None, None).trials
    assert [t["run"]["seed"] for t in trials] == [0, 1, 2, 3, 4]
    assert trials[0]["run"]["env"] == "smac/3m-v0" and trials[0]["run"]["algo"] == "mappo"
    assert trials[0]["run"]["train_batch_size"] == 1000 and trials[0]["stop"] == {}


def test_hypermarl_sweep_is_a_grid_of_methods_and_seeds_with_upstreams_settings():
    sweep = make_sweep(
        "hypermarl", {"samples": 2, "settings": {"hyper.embedding_dim": 8}, "timesteps": 5000}
    )
    trials = sweep.stage("compare", None, None, None).trials
    assert len(trials) == 8
    assert {(t["study"]["method"], t["study"]["seed"]) for t in trials} == {
        (m, s) for m in ("FuPS", "FuPS+ID", "NoPS", "HyperMARL") for s in (0, 1)
    }
    run = {t["study"]["method"]: t["run"] for t in trials if t["study"]["seed"] == 1}
    assert run["HyperMARL"]["algo"] == "hypermarl-mappo" and run["NoPS"]["policies"] == "per_agent"
    assert run["FuPS+ID"]["model.agent_id"] is True and run["FuPS"]["num_minibatches"] == 2
    assert run["HyperMARL"]["seed"] == 1 and run["HyperMARL"]["timesteps"] == 5000
    from tune.trainable import trial_config

    cfg = trial_config(run["HyperMARL"])  # a hyper.* key reaches the hypernetworks
    assert cfg.settings.hyper.embedding_dim == 8 and cfg.settings.hyper.kind() == "learned"
    assert cfg.settings.train_batch_size == 2048 and cfg.settings.num_minibatches == 2
    assert "hyper.embedding_dim" not in run["FuPS"]  # hyper.* keys: HyperMARL's trials only


def test_a_trial_declares_its_runners_and_learners():
    assert trial_cpus({}) == ([{"CPU": 1.0}], "PACK")
    bundles, _ = trial_cpus({"env_runners": 2, "learners": 1, "gpus_per_learner": 1})
    assert bundles == [{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}, {"GPU": 1.0}]


def test_compute_allocation_branches_grpo_off_bc_at_each_fraction(tmp_path):
    sweep = make_sweep("compute_allocation", {"samples": 2, "seeds": 2, "bc_steps": 3})
    assert sweep.fractions == FRACTIONS and set(sweep.space) == set(GRPO_SPACE)
    bc = sweep.stage("bc", None, None, tmp_path).trials
    assert [t["run"]["seed"] for t in bc] == [0, 1] and bc[0]["run"]["algo"] == "bc"
    run = bc[0]["run"]
    assert run["checkpoint_every"] == 1 and run["keep_checkpoints"] == sweep.bc_steps
    # the driver wrote the traces once, into the sweep, for every BC trial to read: enough
    # episodes per task that 3 steps of 32 turns never reuse one
    assert {t["run"]["traces"] for t in bc} == {str(tmp_path / "traces")}
    lines = (tmp_path / "traces" / "traces.jsonl").read_text().splitlines()
    episodes = {(r["env"], r["seed"]) for r in map(json.loads, lines)}
    assert len(episodes) == 3 * sweep.trace_episodes() and 3 * sweep.trace_episodes() >= 3 * 32
    # the teacher priced by the sweep's one ratio (BC multiplies the student's parameters)
    assert run["teacher_ratio"] == 70 / 8 and "teacher_params" not in run
    # a BC run whose FLOPs grow by 10 a step: budget 400 at step 40 (it branches before it)
    trials = pd.DataFrame(
        [{"stage": "bc", "trial": "t0", "status": "finished", "seed": 0, "run_dir": "/r/run"}]
    )
    rows = pd.DataFrame(
        {
            "stage": "bc",
            "trial": "t0",
            "iteration": range(1, 41),
            "flops_total": [10.0 * i for i in range(1, 41)],
        }  # fmt: skip
    )
    grpo = sweep.grpo_trials(trials, rows)
    assert len(grpo) == 6 * 2  # fractions below 1, 2 configurations each
    by_fraction = {}
    for t in grpo:
        by_fraction.setdefault(t["study"]["fraction"], []).append(t)
        assert t["stop"] == {"flops_total": 400.0} and t["study"]["budget"] == 400.0
    assert by_fraction[0.0][0]["run"]["init"] == ""  # from the untrained student
    assert by_fraction[0.5][0]["run"]["init"] == "/r/run/checkpoints/iter_000020"
    assert by_fraction[1 / 6][0]["run"]["init"] == "/r/run/checkpoints/iter_000007"  # 66.7
    assert by_fraction[0.5][0]["study"]["branch_flops"] == 200.0
    # each configuration is drawn once and its knobs are in the run and in the labels
    knobs = [{k: t["run"][k] for k in GRPO_SPACE} for t in grpo]
    assert all(
        k == {g: t["study"][g] for g in GRPO_SPACE} for k, t in zip(knobs, grpo, strict=True)
    )
    assert len({t["study"]["config"] for t in grpo}) == 12
    # the last step is never a branch: that would be pure BC
    late = make_sweep("compute_allocation", {"samples": 1, "fractions": [0.999, 1.0]})
    (t,) = late.grpo_trials(trials, rows)
    assert t["run"]["init"].endswith("iter_000039")
    # a BC run that did not finish gives no branches
    trials.loc[0, "status"] = "error"
    assert sweep.grpo_trials(trials, rows) == []
