"""``arena sweep --watch SWEEP_DIR``: the trial table of a running sweep, redrawn every few
seconds from its folders (any process, no Ray), with each trial's curve; it ends when the
sweep's last stage is over (or on Ctrl-C)."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.live import Live

from tune.results import read_sweep
from tune.runner import trial_table
from tune.sweeps import make_sweep


def watch(sweep_dir: Path, interval: float = 2.0, console: Console | None = None) -> int:
    saved = read_sweep(sweep_dir)
    sweep = make_sweep(saved["name"], saved["values"], check=False)
    stages = tuple(sweep.stage_names)
    metric = getattr(sweep, "metric", "episode_return_mean")
    console = console or Console()

    def over() -> bool:
        return (Path(sweep_dir) / stages[-1] / "done.json").is_file()

    try:
        if console.is_terminal:
            with Live(trial_table(sweep_dir, metric, stages), console=console) as live:
                while not over():
                    time.sleep(interval)
                    live.update(trial_table(sweep_dir, metric, stages))
        else:  # a pipe or a log: one table per interval
            while True:
                console.print(trial_table(sweep_dir, metric, stages))
                if over():
                    break
                time.sleep(interval)
    except KeyboardInterrupt:
        pass
    console.print(f"{sweep_dir}: " + ("over" if over() else "still running"))
    return 0
