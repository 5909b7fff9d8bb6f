"""``arena sweep``: a sweep's stages as Ray Tune experiments, on the embedded Ray or a cluster.

Each stage is a Tune experiment in ``SWEEP_DIR/<stage>``; its trials are
:func:`tune.trainable.sweep_trial` placed with the resources their runs declare
(:func:`tune.sweeps.trial_cpus`). A stage that ends writes ``done.json`` and the sweep's
Parquet tables. ``--resume`` restores the unfinished stage with ``Tuner.restore``: finished
trials stay finished, interrupted ones go on from their last checkpoint, errored ones are
retried. While it runs, a live table of the trials (from the trial folders, as ``arena sweep
--watch`` reads them) is drawn in the terminal.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from envs.files import replacing, write_atomic
from training.config import ConfigError
from tune.results import LABEL_ORDER, collect, read_sweep, save_tables
from tune.sweeps import make_sweep, sweep_values, trial_cpus

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values, width: int = 24) -> str:
    """The last ``width`` finite values as block characters, scaled to their range."""
    vals = [v for v in values if isinstance(v, int | float) and math.isfinite(v)][-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    return "".join(SPARK[min(7, int((v - lo) / span * 7.999))] for v in vals)


def trial_table(sweep_dir: Path, metric: str, stages: tuple[str, ...], total: int = 0) -> Table:
    """The trials of a sweep so far: labels, status, iterations, the metric's last value and
    its curve."""
    trials, rows = collect(sweep_dir, stages)
    title = f"{Path(sweep_dir).name}: {len(trials)} trials"
    if total:
        title += f" of {total} in this stage"
    table = Table(title=title, title_justify="left")
    labels = [c for c in ("stage", *LABEL_ORDER) if c in trials.columns]
    for col in [
        *labels,
        "status",
        "iter",
        metric,
        "FLOPs" if "flops_total" in rows else "",
        "curve",
    ]:
        if col:
            table.add_column(
                col, justify="right" if col not in ("stage", "arm", "status") else "left"
            )
    for _, t in trials.iterrows():
        mine = (
            rows[(rows["stage"] == t["stage"]) & (rows["trial"] == t["trial"])]
            if len(rows)
            else rows
        )
        values = list(mine[metric]) if metric in mine else []
        last = next((v for v in reversed(values) if math.isfinite(v)), math.nan)
        cells = [_cell(t.get(c)) for c in labels]
        cells += [_status(t["status"]), str(t["iterations"]), f"{last:.3g}"]
        if "flops_total" in rows:
            cells.append(f"{mine['flops_total'].iloc[-1]:.3g}" if len(mine) else "")
        cells.append(sparkline(values))
        table.add_row(*cells)
    return table


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3g}"
    return "" if value is None else str(value)


def _status(status: str) -> str:
    colour = {"finished": "green", "error": "red", "stopped": "yellow"}.get(status, "cyan")
    return f"[{colour}]{status}[/{colour}]"


class LiveTable:
    """Redraws the trial table once a second while a stage runs (a thread of the driver)."""

    def __init__(self, console: Console, sweep_dir: Path, metric: str, stages, total: int):
        self.args = (sweep_dir, metric, tuple(stages), total)
        self.live = Live(console=console, refresh_per_second=1, transient=False)
        self.stop = threading.Event()

    def __enter__(self):
        self.live.start()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def _loop(self) -> None:
        while not self.stop.wait(1.0):
            self.draw()

    def draw(self) -> None:
        try:
            self.live.update(trial_table(*self.args))
        except Exception:  # a file half written: next second
            pass

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.draw()
        self.live.stop()
        self.live.console.print()


def tell_dashboard(console: Console, out: Path, embedded: bool) -> None:
    """Where to watch the sweep: Ray's dashboard, TensorBoard and ``--watch``. The embedded
    Ray's dashboard asks for its session token: it is kept, owner-only, in
    ``SWEEP_DIR/dashboard_token`` (never a cluster's own token)."""
    from ray._private.worker import get_dashboard_url  # no public getter

    url = get_dashboard_url()
    lines = [f"Ray dashboard: http://{url}" if url else "Ray dashboard: not running"]
    token = os.environ.get("RAY_AUTH_TOKEN")
    if embedded and url and token and os.environ.get("RAY_AUTH_MODE") == "token":
        path = out / "dashboard_token"
        with replacing(path) as tmp:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
            os.chmod(tmp, 0o600)
        lines[0] += f" (token: {path})"
    lines.append(f"TensorBoard: tensorboard --logdir {out} --host 127.0.0.1")
    lines.append(f"trial table from another terminal: arena sweep --watch {out}")
    console.print("\n".join(lines))


def prepare(name: str | None, values: dict, out: Path, resume: bool, max_concurrent=None):
    """The sweep to run in ``out`` and its trials at once (0: one per CPU): a new one (``out``
    empty or absent), or with ``resume`` the one ``out/sweep.yaml`` holds (settings may not
    change)."""
    if resume:
        saved = read_sweep(out)
        if name and name != saved["name"]:
            raise ConfigError(f"{out} holds a {saved['name']} sweep, not {name}")
        if values:
            raise ConfigError("--resume goes on with the sweep as it was set; drop --set")
        if max_concurrent is not None and max_concurrent != saved["max_concurrent"]:
            raise ConfigError(
                f"--resume goes on with the sweep as it was set (--max-concurrent "
                f"{saved['max_concurrent']}); drop --max-concurrent"
            )
        return make_sweep(saved["name"], saved["values"]), saved["max_concurrent"]
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists already; resume it with --resume, or pick another --out")
    sweep = make_sweep(name, values)
    out.mkdir(parents=True, exist_ok=True)
    saved = {"name": name, "values": sweep_values(sweep), "max_concurrent": max_concurrent or 0}
    write_atomic(out / "sweep.yaml", yaml.safe_dump(saved, sort_keys=False))
    return sweep, saved["max_concurrent"]


def run_sweep(
    name: str | None,
    values: dict,
    out: Path,
    *,
    resume: bool = False,
    address: str | None = None,
    max_concurrent: int | None = None,
    console: Console | None = None,
) -> Path:
    """Runs (or resumes) a sweep to its end; returns its directory."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the live table replaces Tune's own
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    from training import runtime
    from tune.trainable import sweep_trial

    console = console or Console()
    out = Path(out).resolve()
    sweep, max_concurrent = prepare(name, values, out, resume, max_concurrent)
    stages = tuple(sweep.stage_names)
    embedded = not (address or os.environ.get("RAY_ADDRESS"))
    resources = runtime.connect(address)
    tell_dashboard(console, out, embedded)
    slots = max_concurrent or max(1, int(resources.get("CPU", 1)))
    trainable = tune.with_resources(
        sweep_trial,
        lambda config: tune.PlacementGroupFactory(*trial_cpus(config["trial"]["run"])),
    )
    for stage_name in stages:
        stage_dir = out / stage_name
        if (stage_dir / "done.json").is_file():
            continue
        trials, rows = collect(out, stages)
        stage = sweep.stage(stage_name, trials, rows, out)
        if not stage.trials:
            raise ConfigError(f"stage {stage_name} has no trials (did the stages before fail?)")
        if stage.asha:
            scheduler = ASHAScheduler(
                time_attr="iteration",
                metric=stage.metric,
                mode=stage.mode,
                max_t=stage.asha.max_t,
                grace_period=stage.asha.grace_period,
                reduction_factor=stage.asha.reduction_factor,
                stop_last_trials=False,  # a trial at max_t ends by itself (and says so)
            )
        else:
            scheduler = FIFOScheduler()
        # Tuner.restore needs the experiment state, which Tune writes once trials run: a
        # stage killed before that starts afresh.
        if any(stage_dir.glob("experiment_state-*.json")):
            console.print(f"{stage_name}: resuming {stage_dir}")
            tuner = tune.Tuner.restore(
                str(stage_dir), trainable, resume_errored=True, param_space=None
            )
        else:
            tuner = tune.Tuner(
                trainable,
                param_space={"trial": tune.grid_search(stage.trials)},
                tune_config=tune.TuneConfig(
                    scheduler=scheduler,
                    max_concurrent_trials=slots,
                    trial_dirname_creator=lambda t: f"{t.trial_id}",
                    trial_name_creator=lambda t: f"{t.trial_id}",
                ),
                run_config=tune.RunConfig(
                    name=stage_name,
                    storage_path=str(out),
                    verbose=0,
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                ),
            )
        console.print(f"{stage_name}: {len(stage.trials)} trials, {slots} at a time")
        t0 = time.perf_counter()
        # done.json is written inside, so that the table's last draw shows the final statuses
        with LiveTable(console, out, stage.metric, (stage_name,), len(stage.trials)):
            grid = tuner.fit()
            if grid.num_terminated + grid.num_errors < len(grid):  # Ctrl-C: Tune stopped
                save_tables(out, stages)
                raise KeyboardInterrupt(f"resume with: arena sweep --resume --out {out}")
            errors = [str(r.path) for r in grid if r.error is not None]
            if errors:
                save_tables(out, stages)
                raise ConfigError(
                    f"stage {stage_name}: {len(errors)} trial(s) failed (see error.txt in "
                    f"{', '.join(errors[:3])}); fix and run again with: arena sweep --resume "
                    f"--out {out}"
                )
            seconds = round(time.perf_counter() - t0, 1)
            done = {"trials": len(stage.trials), "seconds": seconds}
            write_atomic(stage_dir / "done.json", json.dumps(done))
        trials, _ = save_tables(out, stages)
        counts = trials[trials["stage"] == stage_name]["status"].value_counts().to_dict()
        console.print(f"{stage_name}: done in {seconds:.0f} s ({counts})")
    return out
