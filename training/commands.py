"""``arena train``, ``arena eval`` and ``arena demo``. Parsing imports nothing heavy; each
command imports what it runs."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

DEMO_CONFIG = Path(__file__).with_name("configs") / "demo.yaml"
"""The demo's run: a config file a user can pass to ``arena train --config``."""


def register(sub: argparse._SubParsersAction) -> None:
    from policies.algorithm import names  # the registry of algorithm packages: no torch

    t = sub.add_parser("train", help="train a policy")
    t.add_argument("env", nargs="?", help="env id, e.g. mpe/simple_spread-v3")
    t.add_argument("--algo", choices=names())
    t.add_argument(
        "--policies",
        choices=["auto", "shared", "per_group", "per_agent"],
        help="policy sharing (auto: shared with one agent group, else one per group)",
    )
    t.add_argument("--learners", type=int, help="remote Learner actors (0: in the driver)")
    t.add_argument(
        "--gpus-per-learner", type=float, dest="gpus_per_learner", help="GPUs per Learner"
    )
    g = t.add_mutually_exclusive_group()
    g.add_argument("--timesteps", type=int)
    g.add_argument("--iterations", type=int)
    t.add_argument("--env-runners", type=int, dest="env_runners")
    t.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or embedded)")
    t.add_argument("--out", default="runs", help="root of run directories")
    t.add_argument("--name", help="run name (default: time stamp and seed)")
    t.add_argument("--seed", type=int)
    t.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="train N independent seeds side by side in one process (ippo, mappo)",
    )
    t.add_argument("--config", help="YAML file of config keys")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    t.add_argument("--resume", metavar="RUN", help="continue a run from its last checkpoint")
    t.add_argument(
        "--checkpoint", metavar="iter_N", help="with --resume: the checkpoint to continue from"
    )
    t.add_argument("--traces", metavar="DIR", help="bc: teacher traces (arena web traces)")
    t.add_argument("--init", metavar="RUN", help="grpo: start from this run's newest weights")
    t.add_argument("--curve-every", type=int, default=0, help="print a line every K iterations")
    t.add_argument(
        "--logger",
        metavar="L1,L2",
        help="where metrics go: csv,tensorboard (default), wandb (offline unless WANDB_MODE="
        "online), mlflow (RUN/mlruns or MLFLOW_TRACKING_URI)",
    )
    t.add_argument(
        "--callback",
        action="append",
        metavar="MODULE:CLASS",
        help="a training.run.Callback subclass to add (repeatable)",
    )
    t.set_defaults(arena_handler="training.commands:run_train")

    v = sub.add_parser("eval", help="evaluate a run's policy")
    v.add_argument("run")
    v.add_argument("--episodes", type=int, default=100)
    v.add_argument("--render", metavar="OUT.gif|OUT.mp4", help="animate the first episode")
    v.add_argument("--explore", action="store_true", help="sample actions instead of greedy")
    v.add_argument(
        "--random",
        action="append",
        metavar="MODULE",
        help="let this module's agents act at random (a baseline for one side)",
    )
    v.add_argument(
        "--real",
        type=int,
        default=0,
        metavar="N",
        help="web agents: also N episodes per task on the real pages in Chromium",
    )
    v.add_argument(
        "--seed-index",
        type=int,
        dest="seed_index",
        metavar="K",
        help="the seed to play of a run trained with --seeds N (0..N-1)",
    )
    v.add_argument("--json", action="store_true")
    v.set_defaults(arena_handler="training.commands:run_eval")
    _register_crossplay(sub)
    _register_record(sub)
    _register_offline(sub)
    _register_hierarchy(sub)
    _register_vqa(sub)
    _register_prm(sub)

    d = sub.add_parser(
        "demo", help=f"train mappo on simple_spread ({DEMO_CONFIG.name}), evaluate, render"
    )
    d.add_argument("--timesteps", type=int, help="default: the config's (1,000,000)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default="runs")
    d.set_defaults(arena_handler="training.commands:run_demo")


def run_train(args) -> int:
    from pathlib import Path

    from training.config import (
        ConfigError,
        TrainConfig,
        apply_overrides,
        check_stacked,
        load_yaml,
        set_value,
    )
    from training.run import train

    if args.resume:
        fixed = [
            flag
            for flag, value in (
                ("ENV", args.env),
                ("--algo", args.algo),
                ("--seed", args.seed),
                ("--seeds", args.seeds),
                ("--config", args.config),
                ("--set", args.set),
                ("--policies", args.policies),
                ("--learners", args.learners),
                ("--gpus-per-learner", args.gpus_per_learner),
                ("--name", args.name),
                ("--traces", args.traces),
                ("--init", args.init),
                ("--logger", args.logger),
                ("--callback", args.callback),
            )
            if value is not None
        ]
        if fixed:
            raise ConfigError(
                f"--resume continues a run as it was configured; {', '.join(fixed)} cannot "
                "change it (with --resume: --iterations/--timesteps, --env-runners, --address, "
                "--checkpoint)"
            )
        more = {k: getattr(args, k) for k in ("iterations", "timesteps") if getattr(args, k)}
        if args.env_runners is not None:
            more["env_runners"] = args.env_runners
        run = train(
            None,
            resume=args.resume,
            address=args.address,
            more=more,
            checkpoint=args.checkpoint,
            curve_every=args.curve_every,
        )
    else:
        if not (args.env or args.config):
            raise ConfigError("train needs an ENV id (or a --config naming one, or --resume RUN)")
        if args.checkpoint:
            raise ConfigError("--checkpoint picks the checkpoint of --resume RUN")
        cfg = load_yaml(args.config, args.env) if args.config else TrainConfig(env=args.env)
        if args.algo is not None:
            cfg.set_algo(args.algo)
        for key in (
            "seed",
            "timesteps",
            "iterations",
            "env_runners",
            "policies",
            "learners",
            "gpus_per_learner",
        ):
            if getattr(args, key) is not None:
                setattr(cfg, key, getattr(args, key))
        for key in ("traces", "init"):
            if getattr(args, key) is not None:
                set_value(cfg, key, str(Path(getattr(args, key)).resolve()))
        if args.logger is not None:
            cfg.loggers = [name.strip() for name in args.logger.split(",") if name.strip()]
        cfg.callbacks += args.callback or []
        apply_overrides(cfg, args.set or [])
        if args.seeds is not None:
            check_stacked(cfg.algo)  # before model.seeds, which other algorithms lack
            set_value(cfg, "model.seeds", args.seeds)
        run = train(
            cfg, out=args.out, name=args.name, address=args.address, curve_every=args.curve_every
        )
    from training.checkpoints import load_config
    from training.marl_eval import write_marl_eval
    from training.summary import summary_lines, write_curve

    done = load_config(run)
    write_marl_eval([(done.env, done.algo, done.seed, run)], run / "marl_eval.json")
    write_curve(run)
    print("\n".join(summary_lines(run)))
    return 0


def run_eval(args) -> int:
    from pathlib import Path

    from training import evaluation
    from training.config import ConfigError

    if args.render and Path(args.render).suffix.lower() not in (".gif", ".mp4"):
        raise ConfigError(f"--render {args.render}: the animation is written as .gif or .mp4")

    summary = evaluation.evaluate(
        args.run,
        episodes=args.episodes,
        render=args.render,
        explore=args.explore,
        random_modules=args.random,
        real_episodes=args.real,
        seed_index=args.seed_index,
    )
    if args.json:
        print(json.dumps(summary, indent=2))
    elif "twin" in summary:
        print(text_agent_lines(summary))
    else:
        win = "" if summary["win_rate"] is None else f", win rate {summary['win_rate']:.1%}"
        groups = summary["per_group_return_mean"]
        per_group = (
            "; per group " + ", ".join(f"{g} {r:.2f}" for g, r in groups.items())
            if len(groups) > 1
            else ""
        )
        facts = summary.get("episode_facts") or {}
        shown = [f"{k} {v:.3g}" for k, v in facts.items() if not k.startswith("reward_")]
        print(
            f"{summary['episodes']} episodes: return {summary['return_mean']:.2f} "
            f"+- {summary['return_std']:.2f}{win}{per_group}"
            + (f"; {', '.join(shown)}" if shown else "")
            + f"  ->  {summary['path']}"
        )
        if summary.get("animation"):
            print(f"animation: {summary['animation']}")
    return 0


def text_agent_lines(s: dict) -> str:
    """``arena eval``'s report of a language-model agent."""

    def pct(x):
        return "-" if x is None else f"{x:.1%}"

    lines = [f"greedy success, {s['episodes']} held-out seeds per task (twin):"]
    for backend in ("twin", "real"):
        if backend in s:
            r = s[backend]
            per = ", ".join(f"{t} {pct(v)}" for t, v in r["train_tasks"].items())
            lines.append(
                f"  {backend}: training tasks {pct(r['train_mean'])} ({per}); "
                f"held-out tasks {pct(r['held_out_mean'])}"
            )
    if "sim_to_real_gap" in s:
        lines.append(
            f"  sim-to-real gap (twin - real, training tasks): {s['sim_to_real_gap']:+.1%}"
        )
    if s.get("flops_total"):
        lines.append(f"  run compute: {s['flops_total']:.3g} FLOPs")
    lines.append(f"  -> {s['path']}")
    return "\n".join(lines)


def run_demo(args) -> int:
    """MAPPO on simple_spread for a few minutes (``training/configs/demo.yaml``), then greedy
    evaluation and a GIF."""
    from rich.console import Console

    from training.config import load_yaml
    from training.evaluation import evaluate, random_baseline
    from training.run import train

    console = Console()
    cfg = load_yaml(str(DEMO_CONFIG))
    cfg.seed = args.seed
    cfg.timesteps = args.timesteps or cfg.timesteps
    console.print(
        f"[bold]Arena demo[/]: {cfg.algo} on {cfg.env}, {cfg.timesteps:,} env steps "
        f"({DEMO_CONFIG}); random actions score about -75, higher is better",
        soft_wrap=True,
    )
    t0 = time.perf_counter()
    run = train(cfg, out=args.out, console=console, curve_every=10)
    minutes = (time.perf_counter() - t0) / 60
    gif = run / "episode.gif"
    summary = evaluate(run, episodes=100, render=str(gif))
    random = random_baseline(cfg.env, {}, episodes=100)
    console.print(
        f"trained {minutes:.1f} min; greedy policy over 100 episodes: "
        f"[bold]{summary['return_mean']:.2f}[/] +- {summary['return_std']:.2f} "
        f"(random actions: {random['return_mean']:.2f})"
    )
    # paths and commands on lines of their own, never wrapped: they are for copying
    print(f"run directory: {run}")
    print(f"  config.yaml, metrics.csv, checkpoints/, eval.json, {gif.name}")
    print(f"  tensorboard --logdir {run / 'tb'}")
    print(f"  arena eval {run}; arena serve {run}")
    return 0


def _register_record(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "record",
        help="record a policy's episodes as an offline dataset (Parquet, with a card)",
        description="Plays SOURCE (a run directory, 'random' or 'heuristic') for --episodes "
        "episodes with --workers Ray actors and writes every step to Parquet through Ray Data, "
        "shard by "
        "shard; the same command again finishes a killed recording. --mix A B builds ODIS's "
        "medium-expert from a medium and an expert set (docs/offline.md).",
    )
    r.add_argument(
        "source",
        nargs="?",
        help="a run directory, 'random' (uniform legal actions) or 'heuristic' (SMAC's script)",
    )
    r.add_argument(
        "--env", help="env id, arguments as ID:KEY=VALUE (random needs it; a run's is its own)"
    )
    r.add_argument(
        "--episodes",
        type=int,
        help="episodes to record (default 100; with --mix: "
        "the total, default the smallest source's size)",
    )
    r.add_argument("--out", required=True, help="the dataset folder")
    r.add_argument("--workers", type=int, default=1, help="Ray actors playing at once")
    r.add_argument(
        "--shard-episodes",
        type=int,
        default=100,
        dest="shard_episodes",
        help="episodes per Parquet shard (the unit of resume)",
    )
    r.add_argument("--seed", type=int, default=0, help="episode i is played from seed S + i")
    r.add_argument("--quality", help="the label of the policy: expert, medium or poor")
    r.add_argument("--explore", action="store_true", help="sample actions instead of greedy")
    r.add_argument("--checkpoint", metavar="iter_N", help="the run's checkpoint (default latest)")
    r.add_argument(
        "--mix",
        nargs="+",
        metavar="DATASET",
        help="mix these datasets in equal parts (ODIS's medium-expert)",
    )
    r.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or embedded)")
    r.add_argument("--json", action="store_true", help="print the card as JSON")
    r.set_defaults(arena_handler="training.commands:run_record")


def run_record(args) -> int:
    import sys

    from training import record

    if args.mix:
        if args.source or args.env:
            raise record.RecordError("--mix takes datasets, not a SOURCE or --env")
        card = record.mix(args.mix, args.out, args.episodes, args.quality, args.address)
    else:
        if not args.source:
            raise record.RecordError(
                "record needs a SOURCE (a run directory, 'random' or 'heuristic')"
            )

        def progress(done, total):
            print(f"shard {done}/{total} written", file=sys.stderr)

        card = record.record(
            args.source,
            args.out,
            env=args.env,
            episodes=100 if args.episodes is None else args.episodes,
            workers=args.workers,
            shard_episodes=args.shard_episodes,
            seed=args.seed,
            quality=args.quality,
            explore=args.explore,
            checkpoint=args.checkpoint,
            address=args.address,
            progress=progress,
        )
    if args.json:
        print(json.dumps(card, indent=2))
    else:
        print(f"{record.describe(card)}  ->  {args.out}")
    return 0


def _register_offline(sub: argparse._SubParsersAction) -> None:
    o = sub.add_parser(
        "offline",
        help="train one policy offline on several tasks' datasets and evaluate it zero-shot",
        description="Trains one policy for several tasks on the datasets of arena record: "
        "ODIS's multi-task behaviour cloning (BC-T, entity tokens), ODIS (skill discovery, "
        "then conservative Q-learning over skills) or BiKT (skill and tactic codebooks, then a "
        "bi-level decision transformer), resumably (the same command "
        "again continues); then plays each --eval env greedily (docs/offline.md).",
    )
    o.add_argument("datasets", nargs="*", metavar="DATASET", help="arena record folders")
    o.add_argument("--algo", default="bc", help="bc (ODIS's BC-T), odis or bikt")
    o.add_argument("--out", required=True, help="the run's folder")
    o.add_argument(
        "--steps", type=int, default=35_000, help="task batches of training (ODIS: 35000)"
    )
    o.add_argument(
        "--pretrain-steps",
        type=int,
        default=15_000,
        help="odis, bikt: task batches of skill (and tactic) learning first (ODIS: 15000)",
    )
    o.add_argument("--batch-episodes", type=int, default=32, help="episodes per step")
    o.add_argument("--lr", type=float, default=5e-4)
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--checkpoint-every", type=int, default=500, help="steps between saves")
    o.add_argument(
        "--eval",
        metavar="TASKS",
        help="comma-separated env ids to play zero-shot after training, each with any env "
        "arguments as ENV:KEY=VALUE (mpe/simple_spread-v3:N=5)",
    )
    o.add_argument("--eval-episodes", type=int, default=64, help="episodes per --eval env")
    o.add_argument("--eval-only", action="store_true", help="evaluate the run in --out as it is")
    o.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or embedded)")
    o.add_argument("--json", action="store_true")
    o.set_defaults(arena_handler="training.commands:run_offline")


def run_offline(args) -> int:
    import sys

    from training import offline

    evals = [e.strip() for e in (args.eval or "").split(",") if e.strip()]
    if args.eval_episodes < 1:
        raise offline.OfflineError("--eval-episodes must be at least 1")
    report = {}
    if not args.eval_only:
        cfg = offline.OfflineConfig(
            algo=args.algo,
            steps=args.steps,
            pretrain_steps=args.pretrain_steps,
            batch_episodes=args.batch_episodes,
            lr=args.lr,
            seed=args.seed,
            checkpoint_every=args.checkpoint_every,
        )

        def progress(step, total, loss):
            print(f"step {step}/{total} loss {loss:.4f}", file=sys.stderr)

        report = offline.train(args.datasets, args.out, cfg, args.address, progress)
    elif not evals:
        raise offline.OfflineError("--eval-only needs --eval TASKS")
    if evals:
        report["zero_shot"] = offline.zero_shot(args.out, evals, args.eval_episodes)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        if "steps" in report:
            print(
                f"{report['steps']} steps on {', '.join(report['tasks'])}: loss "
                f"{report['loss']:.4f} ({report['seconds']:.0f} s)  ->  {args.out}"
            )
        for row in report.get("zero_shot", []):
            lo, hi = row["win_ci95"]
            r_lo, r_hi = row["return_ci95"]
            print(
                f"{row['env']}: win {row['win_rate']:.1%} ({lo:.1%}-{hi:.1%}) of "
                f"{row['episodes']}, return {row['return_mean']:.2f} ({r_lo:.2f} to {r_hi:.2f})"
            )
    return 0


def _register_crossplay(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "crossplay",
        help="play a self-play run's population members (and VolleyBots' populations) against "
        "each other (win rates, Elo)",
    )
    c.add_argument(
        "run",
        nargs="?",
        help="a run directory of --algo selfplay (or any volleyball/3v3-v0 run: its module near)",
    )
    c.add_argument(
        "--volleybots",
        metavar="POPS",
        help="comma-separated VolleyBots populations to add as players: sp, fsp, psro_uniform, "
        "psro_nash (volleyball/3v3-v0)",
    )
    c.add_argument("--out", metavar="JSON", help="the report (default: RUN/crossplay.json)")
    c.add_argument("--games", type=int, default=100, help="games per pair of members")
    c.add_argument("--num-envs", type=int, default=64)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--json", action="store_true")
    c.set_defaults(arena_handler="training.commands:run_crossplay")


def run_crossplay(args) -> int:
    from training.config import ConfigError
    from training.crossplay import crossplay

    if args.games < 2 or args.num_envs < 1:
        raise ConfigError("--games must be >= 2 and --num-envs >= 1")
    pops = [p.strip() for p in (args.volleybots or "").split(",") if p.strip()]
    report = crossplay(args.run, args.games, args.num_envs, args.seed, pops, args.out)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    names = report["players"]
    table = Table(
        "player",
        "Elo (K 84)",
        "Bradley-Terry",
        *[f"vs {j}" for j in range(len(names))],
        title=f"{report['env']}: win rate of row against column (draws apart)",
    )
    for i, name in enumerate(names):
        cells = ["-" if x is None else f"{x:.0%}" for x in report["win_rate"][i]]
        table.add_row(
            f"{i}: {name}",
            f"{report['elo'][i]:.0f}",
            f"{report['elo_bradley_terry'][i]:.0f}",
            *cells,
        )
    Console().print(table)
    last = report.get("latest_vs_first")
    if last:
        print(
            f"latest member vs first: {last['wins']} wins, {last['losses']} losses, "
            f"{last['draws']} draws"
        )
    print(f"report: {report['path']}")
    return 0


OPPONENT_CHOICES = ("flat", "hierarchy", "hover", "random") + tuple(
    f"volleybots:{name}" for name in ("sp", "fsp", "psro_uniform", "psro_nash")
)
"""``arena hierarchy --opponent`` (``training.hierarchy.team.OPPONENTS``; here without the
import, which the CLI's start-up would pay for)."""


def _register_hierarchy(sub: argparse._SubParsersAction) -> None:
    h = sub.add_parser(
        "hierarchy",
        help="play the hierarchical 3v3 volleyball team against flat self-play (win rate)",
    )
    h.add_argument(
        "config",
        nargs="?",
        help="YAML naming the skill runs and the opponent run (default: the team that ships "
        "with Arena, envs/volleyball/assets/team)",
    )
    h.add_argument("--export", metavar="DIR", help="copy the team's weights into DIR instead")
    h.add_argument(
        "--high-level",
        metavar="RUN",
        help="a run of volleyball/3v3_high-v0: its learned high level instead of the rule "
        "machine (its team and opponent are the run's)",
    )
    h.add_argument("--games", type=int, default=1000, help="points, one per world")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--greedy", action="store_true", help="greedy actions (default: sampled)")
    h.add_argument(
        "--opponent",
        choices=OPPONENT_CHOICES,
        default="flat",
        help="flat: the self-play run's policy; hierarchy: a second hierarchical team; "
        "volleybots:POP: VolleyBots' released policies (sp is its paper's flat opponent); "
        "hover, random: sanity opponents",
    )
    h.add_argument(
        "--team-start",
        choices=("anchors", "roles"),
        help="where the team starts: roles, VolleyBots' hierarchical start (setter and attacker "
        "at their waiting points; the default against volleybots:*), or the match's anchors",
    )
    h.add_argument(
        "--start-noise",
        type=float,
        help="m (and rad) of noise on the drones' start (default: 0, VolleyBots' start on the "
        "anchors, against volleybots:*, else 0.1)",
    )
    h.add_argument(
        "--start",
        choices=("serve", "receive"),
        default="serve",
        help="receive: every point starts with a ball from the other half to the receiver",
    )
    h.add_argument("--render", metavar="OUT", help="draw world 0's point to a GIF or MP4")
    h.add_argument("--out", metavar="JSON", help="also write the report here")
    h.set_defaults(arena_handler="training.commands:run_hierarchy")


def run_hierarchy(args) -> int:
    from pathlib import Path

    from training.config import ConfigError
    from training.hierarchy.team import (
        BUNDLE,
        TeamConfig,
        export_team,
        play_hierarchy,
    )

    if args.games < 1:
        raise ConfigError("--games must be >= 1")
    if args.high_level:
        from training.hierarchy.high_level import play_high_level

        others = (
            args.config,
            args.export,
            args.render,
            args.opponent != "flat",
            args.start_noise is not None,
            args.team_start is not None,
        )
        if any(others) or args.start != "serve":
            raise ConfigError(
                "--high-level RUN plays the run's own team against its opponent: give no "
                "CONFIG, --export, --render, --opponent, --start-noise, --team-start or "
                "--start with it"
            )
        report = play_high_level(
            args.high_level, args.games, seed=args.seed, explore=not args.greedy
        )
        return _print_report(report, args.out)
    path = Path(args.config) if args.config else BUNDLE / "team.yaml"
    cfg = TeamConfig.from_file(path)
    if args.export:
        print(f"team: {export_team(cfg, args.export)}")
        return 0
    report = play_hierarchy(
        cfg,
        args.games,
        seed=args.seed,
        explore=not args.greedy,
        render=args.render,
        opponent=args.opponent,
        start=args.start,
        start_noise=args.start_noise,
        team_start=args.team_start,
    )
    return _print_report(report, args.out)


def _print_report(report: dict, out: str | None) -> int:
    from pathlib import Path

    from training.checkpoints import write_atomic

    text = json.dumps(report, indent=2)
    if out:
        write_atomic(Path(out), text + "\n")
    print(text)
    return 0


def _register_vqa(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("vqa", help="a learned VQA baseline for an mmwalk dataset")
    vsub = v.add_subparsers(dest="vqa_command", required=True)
    t = vsub.add_parser("train", help="train on the dataset's train split")
    t.add_argument("dataset")
    t.add_argument("--out", required=True, help="directory for model.pt and vocab.json")
    t.add_argument("--epochs", type=int, default=8)
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(arena_handler="training.commands:run_vqa_train")
    p = vsub.add_parser("predict", help="write predictions (eval-vqa's format)")
    p.add_argument("run")
    p.add_argument("dataset")
    p.add_argument("--out", required=True, help="directory for <category>.jsonl")
    p.add_argument("--split", default="test", choices=["train", "val", "test"])
    p.set_defaults(arena_handler="training.commands:run_vqa_predict")


def run_vqa_train(args) -> int:
    from policies.vqa import VQASettings, train

    if args.epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {args.epochs}")
    out = train(args.dataset, args.out, VQASettings(epochs=args.epochs, seed=args.seed))
    print(f"model: {out}")
    return 0


def run_vqa_predict(args) -> int:
    from policies.vqa import predict

    out = predict(args.run, args.dataset, args.out, args.split)
    print(f"predictions: {out} (score them: arena mmwalk eval-vqa {out} {args.dataset})")
    return 0


def _register_prm(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prm", help="a process reward model for web agents (after Web-Shepherd)")
    psub = p.add_subparsers(dest="prm_command", required=True)
    t = psub.add_parser("train", help="fine-tune the judge on arena web prm-data rows")
    t.add_argument("data", help="a directory written by arena web prm-data")
    t.add_argument("--out", required=True, help="run directory (the same command resumes it)")
    t.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    t.add_argument("--lora-rank", type=int, default=8, help="0: full fine-tuning")
    t.add_argument("--max-prompt-tokens", type=int, default=1024)
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--checkpoint-every", type=int, default=50)
    t.add_argument(
        "--no-checklists", action="store_true", help="judge only; do not learn to write checklists"
    )
    t.set_defaults(arena_handler="training.commands:run_prm_train")
    b = psub.add_parser("bench", help="the meta-benchmark: pick the chosen step over rejected ones")
    b.add_argument("scorer", help="a prm train run, or base | random | outcome | oracle | judge")
    b.add_argument("--data", required=True, help="held-out rows (arena web prm-data --out DIR)")
    b.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2", help="for base")
    b.add_argument("--max-prompt-tokens", type=int, default=1024, help="for base")
    b.add_argument(
        "--judge-url", default="", help="for judge: an OpenAI-compatible API base (.../v1)"
    )
    b.add_argument("--judge-model", default="", help="for judge: the model name to ask")
    b.add_argument(
        "--judge-key-env", default="", help="for judge: the environment variable with the API key"
    )
    b.add_argument("--limit", type=int, default=0, help="judge the first N states only (0: all)")
    b.add_argument("--seed", type=int, default=0, help="for random and the intervals")
    b.add_argument("--out", default="", help="also write the result here as JSON")
    b.set_defaults(arena_handler="training.commands:run_prm_bench")
    n = psub.add_parser("best-of-n", help="the PRM as a verifier: a student's best of n actions")
    n.add_argument("run", help="a prm train run")
    n.add_argument("--policy", required=True, help="a bc or grpo run (the student that samples)")
    n.add_argument("--tasks", nargs="+", default=None, help="twin tasks (default: the policy's)")
    n.add_argument("--n", type=int, nargs="+", default=[1, 2, 4, 8])
    n.add_argument("--episodes", type=int, default=20, help="held-out page seeds per task")
    n.add_argument("--temperature", type=float, default=1.0)
    n.add_argument("--max-steps", type=int, default=10, help="the episodes' step limit")
    n.add_argument("--checklist", choices=["written", "twin"], default="written")
    n.add_argument("--seed", type=int, default=0)
    n.add_argument("--out", default="", help="also write the result here as JSON")
    n.add_argument("--plot", default="", help="also plot success against FLOPs here (PNG)")
    n.set_defaults(arena_handler="training.commands:run_prm_best_of_n")


def _bar(label: str):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
    )


def run_prm_train(args) -> int:
    from policies.lm.student import LoRASettings, StudentSettings
    from training import prm

    model = StudentSettings(
        kind=args.model,
        max_prompt_tokens=args.max_prompt_tokens,
        lora=LoRASettings(rank=args.lora_rank),
    )
    cfg = prm.PRMConfig(
        model=model,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
        checklists=not args.no_checklists,
    )
    with _bar("prm train") as bar:
        job = bar.add_task("train", total=cfg.steps)

        def progress(step, total, loss):
            bar.update(job, completed=step, description=f"loss {loss:.4f}")
            bar.console.print(f"step {step}/{total} loss {loss:.4f}")

        report = prm.train(args.data, args.out, cfg, progress)
    print(
        f"{report['steps']} steps over {report['examples']} examples: loss {report['loss']:.4f}, "
        f"{report['train_flops']:.3g} training FLOPs ({report['seconds']:.0f} s)  ->  {args.out}"
    )
    return 0


def run_prm_bench(args) -> int:
    from policies.lm.student import LoRASettings, StudentSettings
    from training import prm

    rows = prm.read_pairs(args.data)
    if args.limit < 0:
        raise prm.PRMError(f"--limit must be >= 0, got {args.limit}")
    rows = rows[: args.limit] if args.limit else rows
    if args.scorer not in prm.BASELINES and not Path(args.scorer).is_dir():
        raise prm.PRMError(
            f"scorer {args.scorer!r}: a prm train run directory, or one of {', '.join(prm.BASELINES)}"
        )
    model = StudentSettings(
        kind=args.model, max_prompt_tokens=args.max_prompt_tokens, lora=LoRASettings()
    )
    judge = None
    if args.scorer == "judge":
        if not (args.judge_url and args.judge_model):
            raise prm.PRMError(
                "judge needs --judge-url (an OpenAI-compatible .../v1) and --judge-model"
            )
        key = os.environ.get(args.judge_key_env, "") if args.judge_key_env else ""
        judge = prm.ChatJudge(args.judge_url, args.judge_model, key)
    score = prm.scorer(args.scorer, model, args.seed, judge)
    with _bar(f"prm bench {Path(args.scorer).name}") as bar:
        job = bar.add_task("bench", total=len(rows))
        result = prm.benchmark(rows, score, lambda i, n: bar.update(job, completed=i))
    result = {"scorer": args.scorer, "data": str(args.data)} | result
    if judge is not None:
        result["judge"] = {"url": judge.url, "model": judge.model, "items": judge.items,
                           "unjudged_items": judge.unjudged, "tokens": judge.tokens}  # fmt: skip
    if args.out:
        from envs.files import write_atomic

        write_atomic(Path(args.out), json.dumps(result, indent=2) + "\n")
    lo, hi = result["accuracy_ci95"]
    print(
        f"{args.scorer}: accuracy {result['accuracy']:.3f} ({lo:.3f}-{hi:.3f}), "
        f"MRR {result['mrr']:.3f}, trajectory accuracy {result['trajectory_accuracy']:.3f} "
        f"over {result['states']} states of {result['task_instances']} task instances"
    )
    final, earlier = (
        "-" if v is None else f"{v:.3f}"
        for v in (result["accuracy_final_step"], result["accuracy_earlier_steps"])
    )
    print(f"  accuracy where the chosen action finishes the task {final}, before that {earlier}")
    return 0


def run_prm_best_of_n(args) -> int:
    import torch

    from training import prm

    cfg = prm.BestOfNConfig(
        n=args.n,
        episodes=args.episodes,
        temperature=args.temperature,
        max_steps=args.max_steps,
        checklist=args.checklist,
        seed=args.seed,
    )
    if bad := cfg.problems():
        raise prm.PRMError("bad best-of-n settings: " + "; ".join(bad))
    torch.set_num_threads(1)
    judge = prm.load_prm(args.run)
    student, tasks = prm.load_student_run(args.policy)
    tasks = args.tasks or tasks
    with _bar("best-of-n") as bar:
        job = bar.add_task("episodes", total=len(cfg.n) * len(tasks) * cfg.episodes)
        result = prm.best_of_n(
            judge, student, tasks, cfg, lambda i, n: bar.update(job, completed=i)
        )
    result = {"prm": args.run, "policy": args.policy} | result
    if args.out:
        from envs.files import write_atomic

        write_atomic(Path(args.out), json.dumps(result, indent=2) + "\n")
    if args.plot:
        prm.plot_best_of_n(result["rows"], args.plot)
    for row in result["rows"]:
        lo, hi = row["success_ci95"]
        print(
            f"n={row['n']}: success {row['success']:.3f} ({lo:.3f}-{hi:.3f}) over "
            f"{row['episodes']} episodes; FLOPs per episode: student "
            f"{row['student_flops_per_episode']:.3g}, PRM {row['prm_flops_per_episode']:.3g}"
        )
    return 0
