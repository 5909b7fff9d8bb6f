"""``arena report SWEEP_DIR``: the sweep's report as Markdown (``report.md`` beside the PNG
and SVG figures) and as one self-contained HTML page (the figures inlined), from its trial
folders (:mod:`tune.results`) and its sweep's sections (:mod:`tune.analysis`)."""

from __future__ import annotations

import base64
import html
import time
from pathlib import Path

import markdown

from training.checkpoints import write_atomic
from tune.results import collect, read_sweep
from tune.sweeps import Section, make_sweep

STYLE = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:1em 0;font-size:0.9em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}code{background:#f6f6f6}"""


def write_report(sweep_dir: Path, out: Path | None = None) -> Path:
    """Writes ``report.md``, the figures and the HTML report; returns the HTML's path."""
    saved = read_sweep(sweep_dir)
    sweep = make_sweep(saved["name"], saved["values"], check=False)
    trials, rows = collect(sweep_dir, tuple(sweep.stage_names))
    if trials.empty or rows.empty:
        raise FileNotFoundError(f"{sweep_dir}: no trial has reported yet")
    out = Path(out) if out else Path(sweep_dir) / "report" / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    figures = out.parent / "figures"
    sections = [what_ran(saved, trials, rows, sweep), *sweep.report(trials, rows, figures)]
    head = (f"# {saved['name']} sweep: {Path(sweep_dir).resolve().name}\n\n"
            f"{len(trials)} trials; report written {time.strftime('%Y-%m-%d %H:%M')}.\n")  # fmt: skip
    md = [head] + [_markdown(s, out.parent) for s in sections]
    write_atomic(out.with_suffix(".md"), "\n".join(md))
    body = [markdown.markdown(head)]
    for s in sections:
        body.append(markdown.markdown(f"## {s.title}\n\n{s.text}", extensions=["tables"]))
        for fig in s.figures:
            data = base64.b64encode(Path(fig).read_bytes()).decode()
            body.append(
                f'<img alt="{html.escape(Path(fig).stem)}" src="data:image/png;base64,{data}">'
            )
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(saved['name'])}"
            f" sweep</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>")  # fmt: skip
    write_atomic(out, page)
    write_sweep_marl_eval(trials, out.parent / "marl_eval.json")
    return out


def write_sweep_marl_eval(trials, path: Path) -> Path | None:
    """The sweep's runs in marl-eval's JSON (``training.marl_eval``), each run under its env,
    algorithm and seed (its trial's seed label, else its place)."""
    from training.checkpoints import RunError, load_config
    from training.marl_eval import write_marl_eval

    runs = []
    for i, t in enumerate(trials.itertuples()):
        run = Path(t.run_dir)
        try:
            cfg = load_config(run)
        except RunError:
            continue  # a trial that never wrote its config
        seed = getattr(t, "seed", None)
        seed = i if seed is None or seed != seed else int(seed)
        runs.append((cfg.env, cfg.algo, seed, run))
    return write_marl_eval(runs, path) if runs else None


def trained(trials) -> str:
    """What each stage trained, read from its trials' ``run/config.yaml``: algorithm, env,
    more tasks and student where the runs have them, seeds, trials (Markdown table)."""
    import pandas as pd

    from training.config import ConfigError, read_config_file
    from tune.analysis import md_table

    found: dict = {}
    for t in trials.itertuples():
        try:
            cfg = read_config_file(Path(t.run_dir) / "config.yaml")
        except (ConfigError, OSError):
            continue  # a trial that never wrote its config
        settings = cfg.get(cfg.get("algo"), {}) or {}
        model = settings.get("model") if isinstance(settings.get("model"), dict) else {}
        key = (t.stage, cfg.get("algo"), cfg.get("env"), ", ".join(settings.get("tasks") or []),
               model.get("kind", ""))  # fmt: skip
        entry = found.setdefault(key, {"seeds": set(), "trials": 0})
        entry["seeds"].add(cfg.get("seed"))
        entry["trials"] += 1
    if not found:
        return ""
    table = pd.DataFrame(
        [
            {"stage": k[0], "algorithm": k[1], "env": k[2], "more tasks": k[3], "student": k[4],
             "seeds": ", ".join(str(s) for s in sorted(v["seeds"], key=str)), "trials": v["trials"]}
            for k, v in found.items()
        ]
    )  # fmt: skip
    table = table.loc[:, (table != "").any()]  # no empty tasks or student columns (MARL runs)
    return "Trained (each trial's `run/config.yaml`):\n\n" + md_table(table) + "\n"


def what_ran(saved: dict, trials, rows, sweep=None) -> Section:
    """What was trained (the sweep's own account where it gives one, each stage's algorithm,
    env, student and seeds), the settings as ``sweep.yaml`` keeps them, and how far its
    trials came."""
    import json

    import pandas as pd

    from tune.analysis import md_table

    def value(v) -> str:
        return json.dumps(v, separators=(", ", ": ")) if isinstance(v, dict | list) else str(v)

    settings = pd.DataFrame(
        [(k, value(v)) for k, v in saved["values"].items()], columns=["setting", "value"]
    )
    text = ""
    describe = getattr(sweep, "describe", None)
    if describe is not None:
        text += describe(trials) + "\n\n"
    ran = trained(trials)
    if ran:
        text += ran + "\n"
    text += f"`arena sweep {saved['name']}` with:\n\n{md_table(settings)}\n"
    if "env_steps" in rows:
        steps = rows.groupby("trial")["env_steps"].max()
        low, high = int(steps.min()), int(steps.max())
        span = f"{low:,}" if low == high else f"{low:,} to {high:,}"
        text += f"\nEach trial trained {span} env steps ({len(steps)} trials reporting).\n"
    return Section("What ran", text)


def _markdown(section: Section, root: Path) -> str:
    figs = "".join(f"\n![{Path(f).stem}]({Path(f).relative_to(root)})\n" for f in section.figures)
    return f"## {section.title}\n\n{section.text}\n{figs}"
