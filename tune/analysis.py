"""The statistics of a sweep's report: bootstrap intervals, values at matched compute, the
web-agent study's hyperparameter importance and model selection, and each sweep's sections
(tables and figures).

Bootstrap: 1,000 resamples, 95% percentile intervals. Where two arms ran the same seeds the
difference is paired (resampling seeds); otherwise each arm is resampled on its own.

Importance (Vattikonda et al. 2025, Algorithm 1): resample the trials with replacement; in
each resample score every configuration as the mean of its best 2 trials and take the best
configuration (a tie shares the win). A value's *win rate* is how often the best
configuration has it, each value's wins divided by its number of runs (so values the random
search drew more often do not win by number) and normalised to sum to 1 over the
hyperparameter's values. Its *relative reward* is the mean score of its runs over the best
value's mean (scores shifted so that the resample's worst run is 0, so returns of any sign
compare), with a 95% interval over resamples.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from tune.sweeps import Section

RESAMPLES = 1000


# --- statistics ------------------------------------------------------------------------------
def bootstrap_ci(values, resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95):
    """(mean, low, high) of the finite ``values``' mean, by percentile bootstrap; the bounds
    are NaN with fewer than 2 values (one value says nothing of the spread)."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if len(x) < 2:
        return (float(x[0]) if len(x) else math.nan), math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = x[rng.integers(len(x), size=(resamples, len(x)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    return (
        float(x.mean()),
        float(np.percentile(means, tail)),
        float(np.percentile(means, 100 - tail)),
    )


def bootstrap_diff(a: dict, b: dict, resamples: int = RESAMPLES, seed: int = 0):
    """(difference, low, high) of mean(a) - mean(b); ``a`` and ``b`` map seed -> value (NaN
    left out). Paired on the seeds both have, when there are 2 or more; else each arm
    resampled on its own (bounds NaN when an arm has fewer than 2)."""
    a = {s: v for s, v in a.items() if math.isfinite(v)}
    b = {s: v for s, v in b.items() if math.isfinite(v)}
    shared = sorted(set(a) & set(b))
    if len(shared) >= 2:
        return bootstrap_ci([a[s] - b[s] for s in shared], resamples, seed)
    xa, xb = (np.asarray(list(d.values()), dtype=float) for d in (a, b))
    if not (len(xa) and len(xb)):
        return math.nan, math.nan, math.nan
    point = float(xa.mean() - xb.mean())
    if len(xa) < 2 or len(xb) < 2:
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    da = xa[rng.integers(len(xa), size=(resamples, len(xa)))].mean(axis=1)
    db = xb[rng.integers(len(xb), size=(resamples, len(xb)))].mean(axis=1)
    d = da - db
    return point, float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))


# --- rliable's aggregates (Agarwal et al., "Deep RL at the Edge of the Statistical Precipice",
# NeurIPS 2021): over runs (and tasks), with a stratified bootstrap ----------------------------
def iqm(scores) -> float:
    """The interquartile mean: the mean of the middle 50% of ``scores`` (rliable's IQM: the
    bottom and top quarter trimmed, fractional runs weighted)."""
    x = np.sort(np.asarray(scores, dtype=float))
    n = len(x)
    if n == 0:
        return math.nan
    lo, hi = n / 4, 3 * n / 4
    weights = np.clip(np.minimum(np.arange(1, n + 1), hi) - np.maximum(np.arange(n), lo), 0, 1)
    return float((x * weights).sum() / weights.sum())


def optimality_gap(scores, target: float = 1.0) -> float:
    """How far runs fall short of ``target`` on average (scores above it count as at it)."""
    x = np.asarray(scores, dtype=float)
    return float(np.mean(np.maximum(target - x, 0.0))) if len(x) else math.nan


AGGREGATES = {
    "IQM": iqm,
    "median": lambda x: float(np.median(x)),
    "mean": lambda x: float(np.mean(x)),
}


def stratified_bootstrap(
    scores_by_task: dict, fn, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """``fn`` of all runs' scores and its 95% interval, resampling runs within each task (so
    every resample keeps each task's number of runs)."""
    tasks = [
        np.asarray(v, dtype=float)[~np.isnan(np.asarray(v, dtype=float))]
        for v in scores_by_task.values()
    ]
    tasks = [t for t in tasks if len(t)]
    if not tasks:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    point = fn(np.concatenate(tasks))
    draws = [
        fn(np.concatenate([t[rng.integers(len(t), size=len(t))] for t in tasks]))
        for _ in range(resamples)
    ]
    return point, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def performance_profile(scores, taus) -> np.ndarray:
    """The share of runs scoring above each threshold in ``taus``."""
    x = np.asarray(scores, dtype=float)
    return np.array([(x > tau).mean() for tau in taus])


def value_at(curve: pd.DataFrame, budget: float, x: str = "flops_total", y: str = "eval_success"):
    """``y`` at matched compute: its last evaluation that had spent at most ``budget`` (0.1%
    over counts as at), so no arm is credited with compute beyond it; NaN if the trial never
    spent the budget (it stopped short) or has no evaluation within it."""
    if curve.empty or curve[x].max() < budget * 0.999:
        return math.nan
    within = curve[(curve[x] <= budget * 1.001) & curve[y].notna()].sort_values(x)
    return float(within[y].iloc[-1]) if len(within) else math.nan


def best_k_mean(scores, k: int = 2) -> float:
    """The mean of the best ``k`` finite scores (the study's score of an RL configuration)."""
    s = sorted((v for v in scores if math.isfinite(v)), reverse=True)[:k]
    return float(np.mean(s)) if s else math.nan


def top_share(scores: pd.Series, share: float = 0.1) -> pd.Series:
    """Which entries are in the top ``share`` (at least one): the study's selection of BC
    checkpoints by area under the learning curve."""
    n = max(1, math.ceil(share * len(scores)))
    return scores.rank(ascending=False, method="first") <= n


def importance(
    runs: pd.DataFrame, params: list[str], score: str = "score", config: str = "config",
    resamples: int = RESAMPLES, seed: int = 0, k: int = 2,
) -> pd.DataFrame:  # fmt: skip
    """Per hyperparameter value: runs, win rate, relative reward and its 95% interval (see
    the module docstring). ``runs`` has one row per trial: its ``config``, ``params`` and
    ``score``."""
    runs = runs[runs[score].notna()].reset_index(drop=True)
    if runs.empty:
        return pd.DataFrame()
    rng = np.random.default_rng(seed)
    values = {p: sorted(runs[p].dropna().unique(), key=str) for p in params}
    counts = {p: runs[p].value_counts().to_dict() for p in params}
    wins = {p: dict.fromkeys(values[p], 0.0) for p in params}
    rel = {p: {v: [] for v in values[p]} for p in params}
    for _ in range(resamples):
        sample = runs.iloc[rng.integers(len(runs), size=len(runs))]
        by_config = sample.groupby(config)[score].apply(lambda s: best_k_mean(s, k))
        tied = by_config[by_config == by_config.max()].index  # a tie shares the win
        for c in tied:
            best = sample[sample[config] == c].iloc[0]
            for p in params:
                wins[p][best[p]] += 1 / len(tied)
        floor = sample[score].min()  # scores shifted so the resample's worst run is 0
        for p in params:
            means = sample.groupby(p)[score].mean() - floor
            top = means.max()
            for v in values[p]:
                if v in means and top > 0:
                    rel[p][v].append(means[v] / top)
    out = []
    for p in params:
        weighted = {v: wins[p][v] / counts[p][v] for v in values[p]}
        total = sum(weighted.values()) or 1.0
        for v in values[p]:
            r = np.asarray(rel[p][v])  # empty when no resample had a positive score
            spread = (
                (r.mean(), np.percentile(r, 2.5), np.percentile(r, 97.5))
                if len(r)
                else (math.nan,) * 3
            )
            out.append({
                "param": p, "value": v, "runs": counts[p][v], "win_rate": weighted[v] / total,
                "rel_reward": float(spread[0]), "rel_low": float(spread[1]), "rel_high": float(spread[2]),
            })  # fmt: skip
    return pd.DataFrame(out)


# --- tables and figures ----------------------------------------------------------------------
def md_table(df: pd.DataFrame, floats: str = "{:.3f}") -> str:
    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else floats.format(v)
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def ci_text(point, low, high, fmt: str | None = None) -> str:
    """``point (low to high)``, with as many decimals as tell the three apart: the interval's
    width sets them (a format, where given, is the least precision)."""
    if math.isnan(point):
        return "n/a"
    width = abs(high - low)
    decimals = 2 if width == 0 or not math.isfinite(width) else -math.floor(math.log10(width)) + 1
    decimals = min(max(decimals, 0), 6)
    if fmt is not None:
        given = fmt.format(0.5).partition(".")[2]
        decimals = max(decimals, len(given) if given.isdigit() else 0)
    f = f"{{:.{decimals}f}}"
    return f"{f.format(point)} ({f.format(low)} to {f.format(high)})"


FEW_SEEDS = 5


def seeds_caveat(n: int) -> str:
    """A warning where an interval rests on fewer than :data:`FEW_SEEDS` values."""
    if n >= FEW_SEEDS:
        return ""
    return (
        f" With {n} seed{'s' * (n != 1)} a bootstrap interval is too narrow to trust (the "
        f"resamples can only repeat those {n} values): run at least {FEW_SEEDS}."
    )


def save_figure(fig, figures: Path, name: str) -> str:
    """PNG and SVG of ``fig`` in ``figures``; returns the PNG's path."""
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    png = figures / f"{name}.png"
    fig.savefig(png, dpi=110, bbox_inches="tight")
    fig.savefig(figures / f"{name}.svg", bbox_inches="tight")
    plt.close(fig)
    return str(png)


def band(curves: list[pd.Series], resamples: int = 200, seed: int = 0):
    """Mean and 95% bootstrap band over curves (aligned on their index), per index value."""
    table = pd.concat(curves, axis=1)
    rng = np.random.default_rng(seed)
    mean, low, high = [], [], []
    for _, row in table.iterrows():
        x = row.dropna().to_numpy(dtype=float)
        if len(x) == 0:
            mean.append(math.nan), low.append(math.nan), high.append(math.nan)
            continue
        m = x[rng.integers(len(x), size=(resamples, len(x)))].mean(axis=1)
        (
            mean.append(x.mean()),
            low.append(np.percentile(m, 2.5)),
            high.append(np.percentile(m, 97.5)),
        )
    return table.index.to_numpy(), np.array(mean), np.array(low), np.array(high)


RATES = ("win_rate", "test_battle_won_mean", "eval_success", "success_rate")
"""Columns that are shares in [0, 1]: their axis is always 0 to 1."""


def curves_figure(rows: pd.DataFrame, y: str, groups: list[str], title: str, figures: Path,
                  name: str, x: str = "env_steps") -> str:  # fmt: skip
    """``y`` against ``x`` (env steps where the rows have them), one line per group (mean
    over its trials) with a 95% band."""
    if x not in rows:
        x = "iteration"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    keyed = rows.groupby(groups, dropna=False) if groups else [("all", rows)]
    for key, part in keyed:
        curves = [c.set_index(x)[y] for _, c in part.groupby("trial") if c[y].notna().any()]
        curves = [c[~c.index.duplicated()].dropna() for c in curves]
        if not curves:
            continue
        xs, m, lo, hi = band(curves)
        label = ", ".join(f"{g}={v}" for g, v in zip(groups, np.atleast_1d(key), strict=False))
        line = ax.plot(xs, m, label=f"{label or 'all'} (n={len(curves)})")[0]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
    ax.set_xlabel(x.replace("_", " ")), ax.set_ylabel(y), ax.set_title(title)
    ax.grid(alpha=0.3)
    if y in RATES:
        ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7)
    return save_figure(fig, figures, name)


def final_values(trials: pd.DataFrame, rows: pd.DataFrame, metric: str) -> pd.Series:
    """Each trial's last finite value of ``metric`` (index: trial)."""
    out = {}
    for t in trials["trial"]:
        vals = rows.loc[rows["trial"] == t, metric].dropna() if metric in rows else []
        out[t] = float(vals.iloc[-1]) if len(vals) else math.nan
    return pd.Series(out)


# --- sections --------------------------------------------------------------------------------
def status_section(trials: pd.DataFrame) -> Section:
    counts = trials.groupby(["stage", "status"]).size().unstack(fill_value=0).reset_index()
    return Section("Trials", md_table(counts))


def unstack_seeds(
    trials: pd.DataFrame, rows: pd.DataFrame, seeds: int, metrics: tuple[str, ...]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stacked trials (``arena train --seeds N``) as N trials each, one per seed: seed k's
    trial ``<trial>/seed<k>`` has ``seed`` k and its ``<metric>_seed<k>`` columns under the
    plain ``metrics`` names (every other column is the stacked trial's)."""
    out_trials, out_rows = [], []
    for t in trials.to_dict("records"):
        part = rows[rows["trial"] == t["trial"]] if len(rows) else rows
        for k in range(seeds):
            name = f"{t['trial']}/seed{k}"
            out_trials.append({**t, "trial": name, "seed": k})
            mine = part.assign(trial=name, seed=k)
            for m in metrics:
                mine[m] = part[f"{m}_seed{k}"] if f"{m}_seed{k}" in part else math.nan
            out_rows.append(mine)
    rows_out = pd.concat(out_rows, ignore_index=True) if out_rows else rows
    return pd.DataFrame(out_trials), rows_out


def seed_sections(trials, rows, metric: str, figures: Path) -> list[Section]:
    finals = final_values(trials, rows, metric)
    table = trials[["seed", "status", "iterations"]].copy()
    table[metric] = finals.reindex(trials["trial"]).to_numpy()
    text = [f"Final {metric} per seed:", "", md_table(table.sort_values("seed")), ""]
    n = int(table[metric].notna().sum())
    text.append(f"**Mean {metric} over {n} seeds: {ci_text(*bootstrap_ci(table[metric]))}** "
                f"(95% bootstrap).{seeds_caveat(n)}")  # fmt: skip
    figs = [curves_figure(rows, metric, [], f"{metric} over seeds (mean, 95% band)", figures,
                          "curve")]  # fmt: skip
    for key, label in (("test_battle_won_mean", "greedy test win rate"), ("win_rate", "win rate")):
        if key != metric and key in rows and rows[key].notna().any():
            wins = final_values(trials, rows, key)
            text.append(f"\n**Final {label}: {ci_text(*bootstrap_ci(wins))}**.")
            figs.append(curves_figure(rows, key, [], f"{label} over seeds", figures, key))
            break
    sections = [status_section(trials), Section(f"{metric} over seeds", "\n".join(text), figs)]
    if n >= MIN_AGGREGATE_RUNS:
        sections.append(aggregates_section({"all": table[metric].to_numpy()}, metric, figures))
    return sections


MIN_AGGREGATE_RUNS = 3
"""Runs a report needs before it gives rliable's aggregates."""


def aggregates_section(scores_by_task: dict, metric: str, figures: Path) -> Section:
    """rliable's aggregates of the runs' final scores: IQM, median and mean with 95% stratified
    bootstrap intervals, the optimality gap where the score is a rate, and the performance
    profile (the share of runs above each score)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fns = dict(AGGREGATES)
    if metric in RATES:
        fns["optimality gap"] = optimality_gap
    table = pd.DataFrame(
        [(name, ci_text(*stratified_bootstrap(scores_by_task, fn))) for name, fn in fns.items()],
        columns=["aggregate", f"{metric} (95% stratified bootstrap)"],
    )
    every = np.concatenate([np.asarray(v, dtype=float) for v in scores_by_task.values()])
    every = every[~np.isnan(every)]
    lo, hi = (0.0, 1.0) if metric in RATES else (float(every.min()), float(every.max()))
    taus = np.linspace(lo, hi, 101)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.step(taus, performance_profile(every, taus), where="post")
    ax.set_xlabel(f"{metric} threshold"), ax.set_ylabel("share of runs above it")
    ax.set_ylim(-0.02, 1.02), ax.grid(alpha=0.3)
    ax.set_title(f"performance profile ({len(every)} runs)")
    text = (
        "Aggregates of the runs' final scores as rliable computes them (Agarwal et al. 2021): "
        "the interquartile mean (IQM) is robust to a run that failed or soared, the "
        "intervals resample runs within each task.\n\n" + md_table(table)
    )
    return Section("Aggregates (rliable)", text, [save_figure(fig, figures, "profile")])


def sensitivity_sections(trials, rows, metric: str, params: list[str], figures: Path):
    """Configurations ranked at the iteration every trial reached (ASHA stops the ones
    behind at its rungs, so later values exist only for the ones it kept), their curves, and
    each value's importance by that score."""
    runs = trials.copy()
    common = int(runs["iterations"][runs["iterations"] > 0].min())
    at = rows[rows["iteration"] == common].set_index("trial")[metric]
    runs["score"] = at.reindex(runs["trial"]).to_numpy()
    runs["last"] = final_values(trials, rows, metric).reindex(trials["trial"]).to_numpy()
    table = runs[["config", *params, "status", "iterations", "score", "last"]]
    table = table.sort_values("score", ascending=False).rename(
        columns={"score": f"{metric} at iteration {common}", "last": "last value"}
    )
    text = (f"Every configuration is scored at iteration {common}, the last one all of them "
            f"reached (ASHA stopped the ones behind at its rungs), and its last value is shown "
            f"beside:\n\n" + md_table(table, "{:.4g}"))  # fmt: skip
    imp = importance(runs, params, k=1)
    sections = [status_section(trials), Section("Configurations", text, [
        curves_figure(rows, metric, ["config"], f"{metric} per configuration", figures, "curves")
    ])]  # fmt: skip
    sections.append(importance_section(imp, "Hyperparameter importance", figures, "importance"))
    return sections


def method_sections(trials, rows, metric: str, methods: list[str], figures: Path):
    """Methods compared over seeds (the ``hypermarl`` sweep): per method its final
    ``metric``'s IQM and mean with 95% bootstrap intervals over seeds, its final SND; the
    last method's paired difference from each other one (seed by seed); the curves of
    ``metric`` and SND per method."""
    finals = final_values(trials, rows, metric).reindex(trials["trial"]).to_numpy()
    runs = trials.assign(score=finals)
    for col in ("snd", "snd_tv"):
        runs[col] = final_values(trials, rows, col).reindex(trials["trial"]).to_numpy()
    table, by_seed = [], {}
    for method in methods:
        mine = runs[runs["method"] == method]
        scores = mine["score"].to_numpy(dtype=float)
        n = int(np.isfinite(scores).sum())
        by_seed[method] = dict(zip(mine["seed"], scores, strict=True))
        table.append({
            "method": method,
            "seeds": n,
            f"IQM {metric} (95% CI)": ci_text(*stratified_bootstrap({"all": scores}, iqm)),
            "mean (95% CI)": ci_text(*bootstrap_ci(scores)),
            "final SND": float(np.nanmean(mine["snd"])) if mine["snd"].notna().any() else math.nan,
            "final SND (TV)": float(np.nanmean(mine["snd_tv"])) if mine["snd_tv"].notna().any() else math.nan,
        })  # fmt: skip
    few = min(t["seeds"] for t in table)
    text = [f"Final {metric} per method over seeds (IQM: rliable's interquartile mean, its "
            "interval a bootstrap over seeds):", "", md_table(pd.DataFrame(table)), ""]  # fmt: skip
    last = methods[-1]
    diffs = [
        {"difference": f"{last} - {m}", "mean (95% CI, paired by seed)":
         ci_text(*bootstrap_diff(by_seed[last], by_seed[m]))}
        for m in methods[:-1]
    ]  # fmt: skip
    if diffs:
        text += ["", md_table(pd.DataFrame(diffs))]
    text.append(seeds_caveat(few).strip())
    figs = [curves_figure(rows, metric, ["method"], f"{metric} per method", figures, "curves")]
    if "snd" in rows and rows["snd"].notna().any():
        figs.append(curves_figure(rows, "snd", ["method"], "SND per method", figures, "snd"))
    return [status_section(trials), Section("Methods", "\n".join(text), figs)]


def _label(value) -> str:
    return value if isinstance(value, str | bool) else f"{value:g}"


def importance_section(imp: pd.DataFrame, title: str, figures: Path, name: str) -> Section:
    if imp.empty:
        return Section(title, "No scored runs.")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    params = list(dict.fromkeys(imp["param"]))
    fig, axes = plt.subplots(1, len(params), figsize=(2.2 * len(params), 3), squeeze=False)
    for ax, p in zip(axes[0], params, strict=True):
        part = imp[imp["param"] == p]
        ax.bar([_label(v) for v in part["value"]], part["win_rate"], color="tab:blue")
        ax.set_title(p, fontsize=8), ax.set_ylim(0, 1), ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("win rate")
    fig.tight_layout()
    table = imp.assign(
        value=[_label(v) for v in imp["value"]],
        rel_reward=[
            ci_text(r, lo, hi, "{:.2f}")
            for r, lo, hi in zip(imp["rel_reward"], imp["rel_low"], imp["rel_high"], strict=True)
        ],  # fmt: skip
    ).drop(columns=["rel_low", "rel_high"])
    text = ("Win rate: how often the best configuration of a bootstrap resample has the value "
            "(weighted by 1/runs with the value); relative reward: the value's mean score over "
            "the best value's, 95% interval.\n\n" + md_table(table, "{:.2f}"))  # fmt: skip
    return Section(title, text, [save_figure(fig, figures, name)])


SHARES = (1 / 3, 2 / 3, 1.0)
"""Budgets the allocation is compared at, as shares of the full budget B."""


def allocation_points(runs: pd.DataFrame, rows: pd.DataFrame, budgets: dict, share: float):
    """Every trial's success at budget ``share * B`` (its seed's B) under its teacher
    fraction there: 1 for the BC runs; for a GRPO trial branched at nominal fraction f of B,
    f / share (left out if its branch is not below the budget: it was still in BC). NaN
    where a trial never reached the budget. Returns ``{fraction: {config: {seed: success}}}``."""
    out: dict = {}
    for _, t in runs.iterrows():
        seed = int(t["seed"])
        if seed not in budgets:
            continue
        b = budgets[seed] * share
        if t["stage"] == "bc":
            f, config = 1.0, "bc"
        else:
            if float(t.get("branch_flops") or 0.0) >= 0.999 * b:
                continue
            f, config = round(float(t["fraction"]) / share, 3), t["config"]
        success = value_at(rows[rows["trial"] == t["trial"]], b)
        out.setdefault(f, {}).setdefault(config, {})[seed] = success
    return out


def budget_label(share: float) -> str:
    return "B" if share == 1 else f"{share:.2f} B"


def expected_arms(fractions, share: float) -> list[float]:
    """The teacher fractions a sweep's arms have at budget ``share * B``: pure BC, and each
    GRPO fraction f below the share as f / share (those at or past it are still BC there)."""
    return sorted({1.0, *(round(f / share, 3) for f in fractions if f < share)})


def allocation_table(points: dict, share: float = 1.0, expected=()) -> tuple[str, dict]:
    """The table (per fraction: how many of its trials reached the budget, its best
    configuration by the mean of its best 2 trials, that one's success, all configurations'
    success, differences to pure BC and pure GRPO) and the verdict; every fraction of
    ``points`` or ``expected`` has a row, those none of whose trials reached the budget too.
    Returns (Markdown, {fraction: best configuration's seed -> success})."""
    label = budget_label(share)
    best = {}
    for f, configs in points.items():
        scores = {c: best_k_mean(list(v.values())) for c, v in configs.items()}
        scores = {c: v for c, v in scores.items() if math.isfinite(v)}
        if scores:
            best[f] = (max(scores, key=scores.get), configs[max(scores, key=scores.get)])
    arms = {f: seeds for f, (_, seeds) in best.items()}
    pure_bc, pure_grpo = arms.get(1.0), arms.get(0.0)
    table, fewest = [], math.inf
    for f in sorted(set(points) | set(expected)):
        every = [v for seeds in points.get(f, {}).values() for v in seeds.values()]
        got = sum(math.isfinite(v) for v in every)  # the others have no value at this budget
        row = {
            "teacher fraction": f"{f:.3f}",
            "arm": "pure BC" if f == 1 else ("pure GRPO" if f == 0 else "BC then GRPO"),
            "status": f"{got}/{len(every)} reached {label}" if every else "no trials",
            "best config": "", "seeds": 0, "success (95% CI)": "n/a", "all configs": "n/a",
            "minus pure BC": "", "minus pure GRPO": "",
        }  # fmt: skip
        if f in arms:
            n = sum(math.isfinite(v) for v in arms[f].values())
            fewest = min(fewest, n)
            row.update({
                "best config": best[f][0], "seeds": n,
                "success (95% CI)": ci_text(*bootstrap_ci(list(arms[f].values()))),
                "all configs": ci_text(*bootstrap_ci(every)),
                "minus pure BC": ci_text(*bootstrap_diff(arms[f], pure_bc)) if pure_bc and f < 1 else "",
                "minus pure GRPO": ci_text(*bootstrap_diff(arms[f], pure_grpo)) if pure_grpo and f > 0 else "",
            })  # fmt: skip
        table.append(row)
    lines = [md_table(pd.DataFrame(table)), ""] if table else [f"No trial at {label}."]
    if not arms and table:
        lines.append(f"No trial reached {label}.")
    if math.isfinite(fewest):
        caveat = seeds_caveat(int(fewest)).strip()
        if caveat:
            lines.append(f"Fewest seeds behind an interval here: {int(fewest)}. {caveat}\n")
    mixed = {f: a for f, a in arms.items() if 0 < f < 1}
    if mixed:
        fbest = max(mixed, key=lambda f: np.nanmean(list(mixed[f].values())))
        lines.append(f"Best mixed allocation: teacher fraction **{fbest:.3f}**, success "
                     f"{ci_text(*bootstrap_ci(list(mixed[fbest].values())))}.")  # fmt: skip
        for name, ref in (("pure BC", pure_bc), ("pure GRPO", pure_grpo)):
            if ref:
                d = bootstrap_diff(mixed[fbest], ref)
                word = ("beats" if d[1] > 0 else "is beaten by" if d[2] < 0
                        else "is not separable from")  # fmt: skip
                lines.append(f"- It **{word}** {name} at equal FLOPs: difference {ci_text(*d)}.")
    return "\n".join(lines), arms


def allocation_sections(
    trials, rows, params: list[str], figures: Path, fractions: list[float] | None = None
) -> list[Section]:
    """The compute-allocation study: success per teacher fraction at the budget and at
    smaller ones (a row for every arm of the sweep's ``fractions``, reached or not), the
    verdict (mixed against pure BC and pure GRPO), the curves, the BC runs' model selection,
    and the GRPO knobs' importance per warm-start level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets, teacher, unfinished = {}, {}, []
    for _, t in trials[trials["stage"] == "bc"].iterrows():
        curve = rows[rows["trial"] == t["trial"]] if len(rows) else rows
        if t["status"] == "finished" and len(curve):
            last = curve.loc[curve["flops_total"].idxmax()]
            budgets[int(t["seed"])] = float(last["flops_total"])
            teacher[int(t["seed"])] = float(last.get("flops_teacher", math.nan))
        else:
            unfinished.append(f"seed {t['seed']} ({t['status']}, {t['iterations']} iterations)")
    if not budgets:
        return [status_section(trials), Section("Compute allocation", "No BC run finished.")]
    fractions = sorted(set(fractions or []) | set(trials.get("fraction", pd.Series()).dropna()))
    runs = trials.copy()
    runs["score"] = [
        value_at(rows[rows["trial"] == t["trial"]], budgets.get(int(t["seed"]), math.nan))
        for _, t in runs.iterrows()
    ]
    grpo = runs[runs["stage"] == "grpo"]
    budget_text = ", ".join(
        f"seed {s}: {b:.3g}" + (f" (teacher {teacher[s] / b:.0%})" if teacher[s] >= 0 else "")
        for s, b in sorted(budgets.items())
    )
    text = [
        f"Budget B (the pure-BC run's FLOPs, teacher included) per seed: {budget_text}.",
    ]
    if unfinished:
        text.append(f"Left out, their BC run unfinished (no budget): {', '.join(unfinished)}.")
    text += [
        "",
        "Success: greedy held-out success at the last evaluation within the budget (no arm is "
        "credited with compute past it); a trial that stopped short of the budget (at "
        "grpo_max_iterations), or whose first GRPO iteration already overshot it, has none. "
        "Every arm has a row: 'status' counts its trials that reached the budget ('no "
        "trials': none ran, or every one branched at or past it). At a budget below B, a "
        "GRPO trial branched at fraction f of B has fraction f / share of it; one branched "
        "at or past that budget is still BC there (the pure-BC row). "
        "Each fraction's best configuration has the best mean of its best 2 trials; 'seeds' "
        "counts those with a value, the seeds its interval is over; the "
        "difference columns compare it with the other arm seed by seed (paired bootstrap). "
        "Picking the best configuration and the best fraction on the trials they are scored on "
        "flatters them; the 'all configs' column does not.",
    ]
    best_at = {}
    for share in SHARES[::-1]:
        points = allocation_points(runs, rows, budgets, share)
        table, arms = allocation_table(points, share, expected_arms(fractions, share))
        best_at[share] = {f: np.nanmean(list(a.values())) for f, a in arms.items()}
        text += ["", f"### At {budget_label(share)}", "", table]

    # success against FLOPs, per warm-start level (its best configuration at B)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    cmap = plt.get_cmap("viridis")
    full = allocation_points(runs, rows, budgets, 1.0)
    chosen = [(1.0, runs[runs["stage"] == "bc"])]
    for f in sorted(full):
        if f < 1:
            configs = full[f]
            c = max(
                configs, key=lambda c: np.nan_to_num(best_k_mean(list(configs[c].values())), nan=-1)
            )
            chosen.append((f, grpo[grpo["config"] == c]))
    grid = np.linspace(0, max(budgets.values()), 41)
    for f, part in chosen:
        curves = []
        for _, t in part.iterrows():
            c = rows[rows["trial"] == t["trial"]].dropna(subset=["eval_success"])
            c = c.sort_values("flops_total")
            if len(c):
                idx = np.searchsorted(c["flops_total"].to_numpy(), grid, side="right") - 1
                ys = np.where(idx >= 0, c["eval_success"].to_numpy()[np.maximum(idx, 0)], np.nan)
                ys[grid > c["flops_total"].max() * 1.001] = np.nan
                curves.append(pd.Series(ys, index=grid))
        if curves:
            xs, m, lo, hi = band(curves)
            line = ax.plot(xs, m, color=cmap(0.9 * f), label=f"f={f:.2f}")[0]
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("FLOPs (teacher + student)"), ax.set_ylabel("held-out success")
    ax.set_title("success against compute, per teacher fraction (mean over seeds, 95% band)")
    ax.grid(alpha=0.3), ax.legend(fontsize=7, ncol=2)
    fig1 = save_figure(fig, figures, "allocation_curves")

    fig, ax = plt.subplots(figsize=(6, 4))
    for share, best in best_at.items():
        xs = sorted(f for f in best if math.isfinite(best[f]))
        if xs:
            ax.plot(xs, [best[x] for x in xs], marker="o", label=f"budget {share:.2f} B")
    ax.set_xlabel("teacher fraction of the budget"), ax.set_ylabel("mean success, best config")
    ax.set_title("success against teacher fraction at fixed budgets"), ax.grid(alpha=0.3)
    ax.legend()
    fig2 = save_figure(fig, figures, "allocation_fraction")

    sections = [
        status_section(trials),
        Section("Compute allocation", "\n".join(text), [fig1, fig2]),
    ]
    bc_runs = runs[runs["stage"] == "bc"].copy()
    bc_runs["AUC"] = final_values(bc_runs, rows, "eval_auc").reindex(bc_runs["trial"]).to_numpy()
    bc_runs["top 10%"] = top_share(bc_runs["AUC"])
    sections.append(Section(
        "BC runs (model selection by area under the curve)",
        "The study branches RL off SFT checkpoints in the top 10% by area under the learning "
        "curve; here every BC run is branched from, and the top 10% are marked.\n\n"
        + md_table(bc_runs[["seed", "AUC", "score", "top 10%"]].rename(columns={"score": "success at B"})),
    ))  # fmt: skip
    for f in sorted(grpo["fraction"].unique()) if len(grpo) else []:
        imp = importance(grpo[grpo["fraction"] == f], params)
        sections.append(importance_section(
            imp, f"GRPO knobs at warm-start level f={f:.3f}", figures, f"importance_f{f:.3f}"
        ))  # fmt: skip
    return sections
