"""The report's statistics against cases with known answers: the bootstrap interval of a mean,
paired differences, values at matched compute, the study's model selection, and the
importance analysis on synthetic results with a planted best value."""

import math
import random

import numpy as np
import pandas as pd
import pytest

from tune.analysis import (
    best_k_mean,
    bootstrap_ci,
    bootstrap_diff,
    importance,
    top_share,
    value_at,
)


def test_bootstrap_interval_of_a_mean_matches_the_normal_approximation():
    # 200 coin flips, half heads: mean 0.5, standard error sqrt(0.25 / 200) = 0.0354, so
    # the 95% interval is 0.5 +- 1.96 * 0.0354 = 0.431 .. 0.569.
    mean, low, high = bootstrap_ci([0.0, 1.0] * 100, resamples=1000, seed=1)
    assert mean == 0.5
    assert low == pytest.approx(0.431, abs=0.012) and high == pytest.approx(0.569, abs=0.012)
    # a constant has no spread; NaNs are left out; nothing gives NaN
    assert bootstrap_ci([0.7, 0.7, math.nan, 0.7]) == pytest.approx((0.7, 0.7, 0.7))
    assert all(math.isnan(v) for v in bootstrap_ci([]))


def test_paired_difference_removes_the_spread_the_arms_share():
    # Seeds differ a lot, but arm a is 0.1 above arm b on every one of them: paired, the
    # interval is a point; unpaired (no shared seeds) it is wide.
    b = {s: v for s, v in enumerate([0.1, 0.5, 0.9, 0.3])}
    a = {s: v + 0.1 for s, v in b.items()}
    assert bootstrap_diff(a, b) == pytest.approx((0.1, 0.1, 0.1))
    shifted = {s + 10: v for s, v in a.items()}
    d, low, high = bootstrap_diff(shifted, b)
    assert d == pytest.approx(0.1) and low < 0 < high


def test_value_at_matched_compute_is_the_last_evaluation_within_the_budget():
    curve = pd.DataFrame(
        {"flops_total": [1.0, 2.0, 3.0, 4.0], "eval_success": [0.1, 0.3, math.nan, 0.9]}
    )
    assert value_at(curve, 2.5) == 0.3  # not the 0.9 bought with more compute
    assert value_at(curve, 3.0) == 0.3  # row 3 has no evaluation: the one before
    assert value_at(curve, 3.999) == 0.9  # within 0.1% of the budget counts as at it
    assert value_at(curve, 1.0) == 0.1
    assert math.isnan(value_at(curve, 5.0))  # stopped short of the budget
    assert math.isnan(value_at(curve, 0.5))  # its first evaluation already overshot it


def test_model_selection_as_the_study():
    assert best_k_mean([0.2, 0.9, 0.5, math.nan, 0.7]) == pytest.approx(0.8)
    assert best_k_mean([0.4]) == 0.4
    picked = top_share(pd.Series([0.1, 0.9, 0.3] + [0.2] * 17))  # 20 runs: the top 2
    assert picked.sum() == 2 and picked.iloc[1]
    assert top_share(pd.Series([0.3, 0.6])).tolist() == [False, True]  # at least one


def synthetic_runs(seed: int = 0) -> pd.DataFrame:
    """Random search over lr (drawn unevenly), temperature and clip; the score depends on lr
    alone and is highest at lr=1e-3, the least drawn value; 3 seeds per configuration."""
    rng = random.Random(seed)
    noise = np.random.default_rng(seed)
    rows = []
    for c in range(40):
        lr = rng.choices([1e-4, 1e-3, 1e-2], weights=[6, 1, 3])[0]
        temperature = rng.choice([0.25, 1.0])
        clip = rng.choice([True, False])
        base = {1e-4: 0.3, 1e-3: 0.8, 1e-2: 0.5}[lr]
        for s in range(3):
            score = float(np.clip(base + noise.normal(0, 0.05), 0, 1))
            rows.append({"config": f"c{c}", "seed": s, "lr": lr, "temperature": temperature,
                         "clip": clip, "score": score})  # fmt: skip
    return pd.DataFrame(rows)


def test_importance_finds_the_planted_best_value():
    runs = synthetic_runs()
    assert (runs["lr"] == 1e-3).sum() < (runs["lr"] == 1e-4).sum()  # drawn least often
    imp = importance(runs, ["lr", "temperature", "clip"], resamples=300).set_index(
        ["param", "value"]
    )
    lr = imp.loc["lr"]
    assert lr["win_rate"].idxmax() == 1e-3 and lr.loc[1e-3, "win_rate"] > 0.9
    assert lr.loc[1e-3, "rel_reward"] == pytest.approx(1.0)
    # about (0.3 - w) / (0.8 - w), w the worst run's score (about 0.15): clearly below 1
    assert lr.loc[1e-4, "rel_high"] < 0.45
    # win rates are probabilities over each hyperparameter's values
    for p in ("lr", "temperature", "clip"):
        assert imp.loc[p, "win_rate"].sum() == pytest.approx(1.0)
    # returns below zero (an MPE return) rank the same way
    shifted = importance(runs.assign(score=runs["score"] - 5), ["lr"], resamples=300)
    shifted = shifted.set_index("value")
    assert shifted.loc[1e-3, "rel_reward"] == pytest.approx(1.0)
    assert shifted.loc[1e-4, "rel_reward"] == pytest.approx(lr.loc[1e-4, "rel_reward"])
    # an irrelevant one moves only with the lr values its runs happened to draw
    assert (imp.loc["temperature", "rel_low"] > 0.5).all()


def test_importance_weights_each_value_by_its_runs():
    # No hyperparameter matters; value "a" was drawn 9 times as often as "b". Unweighted,
    # "a" would win about 90% of the time by number alone; weighted by 1/runs, about half.
    rng = np.random.default_rng(0)
    runs = pd.DataFrame(
        {
            "config": [f"c{i}" for i in range(100)],
            "x": ["a"] * 90 + ["b"] * 10,
            "score": rng.uniform(0, 1, 100),
        }  # fmt: skip
    )
    imp = importance(runs, ["x"], resamples=2000, k=1).set_index("value")
    assert 0.25 < imp.loc["b", "win_rate"] < 0.75


def test_importance_splits_a_tie_between_the_tied_configurations():
    # every trial failed (GRPO from an untrained student): no value is better than another
    runs = pd.DataFrame(
        {
            "config": ["c0", "c0", "c1", "c1", "c2", "c2"],
            "x": ["a", "a", "a", "a", "b", "b"],
            "score": [0.0] * 6,
        }  # fmt: skip
    )
    imp = importance(runs, ["x"], resamples=200).set_index("value")
    # about even (a resample without c2 gives "a" the whole win), not 2 to 1 by number
    assert imp.loc["b", "win_rate"] == pytest.approx(0.5, abs=0.05)
    assert math.isnan(imp.loc["a", "rel_reward"])  # no positive score to compare with


def test_intervals_show_the_decimals_that_tell_them_apart():
    from tune.analysis import ci_text, seeds_caveat

    assert ci_text(10.21, 9.84, 10.63) == "10.21 (9.84 to 10.63)"  # not "10 (10 to 10)"
    assert ci_text(52.4, 48.8, 56.1) == "52.4 (48.8 to 56.1)"
    assert ci_text(0.75, 0.71, 0.79) == "0.750 (0.710 to 0.790)"
    assert ci_text(1.0, 1.0, 1.0) == "1.00 (1.00 to 1.00)"
    assert ci_text(0.5, 0.25, 0.75, "{:.3f}") == "0.500 (0.250 to 0.750)"
    assert "at least 5" in seeds_caveat(2) and seeds_caveat(5) == ""


def test_rliable_aggregates_against_known_answers():
    from tune.analysis import (
        iqm,
        optimality_gap,
        performance_profile,
        stratified_bootstrap,
    )

    assert iqm(range(1, 9)) == 4.5  # the middle four of 1..8
    assert iqm([0, 0, 0, 100]) == 0.0  # one run that soared moves it not at all
    assert iqm([1, 2, 3, 4, 5]) == pytest.approx(3.0)  # fractional ends weighted
    assert optimality_gap([1.0, 0.5, 1.2], target=1.0) == pytest.approx(0.5 / 3)
    assert performance_profile([0.1, 0.5, 0.9], [0.0, 0.5, 1.0]).tolist() == [1.0, 1 / 3, 0.0]
    # a task whose runs all agree has no spread; resampling within tasks keeps their sizes
    point, low, high = stratified_bootstrap({"a": [1.0, 1.0], "b": [3.0, 3.0, 3.0]}, np.mean)
    assert point == pytest.approx(2.2) and low == high == pytest.approx(2.2)


def test_a_run_in_marl_evals_format(tmp_path):
    from training.marl_eval import marl_eval_json

    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.csv").write_text(
        "iteration,env_steps,episode_return_mean,win_rate,test_return_mean,test_battle_won_mean\n"
        "1,2000,12.0,0.0,8.0,0.25\n2,4000,15.0,0.1,nan,nan\n3,6000,18.0,0.2,20.0,1.0\n"
    )
    out = marl_eval_json([("smac/3m-v0", "qmix", 4, run)])
    entry = out["smac"]["3m-v0"]["qmix"]["run_4"]
    assert entry["step_0"] == {"step_count": 2000, "return": [8.0], "win_rate": [0.25]}
    assert entry["step_1"] == {"step_count": 6000, "return": [20.0], "win_rate": [1.0]}
    assert entry["absolute_metrics"] == {"return": [20.0], "win_rate": [1.0]}
