"""The ``arena`` command line.

    arena envs [--json] [--no-cache]
    arena train ENV --algo ALGO [--timesteps N | --iterations N] [--env-runners N]
                [--policies auto|shared|per_group|per_agent] [--learners N]
                [--gpus-per-learner G] [--address A] [--out DIR] [--name NAME] [--seed S]
                [--config FILE] [--set key=value ...] [--resume RUN [--checkpoint iter_N]]
    arena eval RUN [--episodes N] [--render out.gif] [--explore] [--random MODULE] [--json]
    arena crossplay RUN [--games N] [--json]
    arena record RUN|random|heuristic [--env ID] --episodes N --out DIR [--workers K] [--quality Q]
    arena record --mix DATASET DATASET ... --out DIR
    arena offline DATASET ... --out DIR [--algo bc|odis|bikt] [--steps N] [--eval ENV[:KEY=VALUE],...]
    arena demo [--timesteps N] [--seed S] [--out DIR]
    arena serve RUN|smollm2 [NAME=RUN ...] [--host H] [--port P] [--replicas N | --autoscale MIN:MAX]
    arena submit [--address http://HEAD:8265] [--working-dir .] [--no-wait] -- arena COMMAND ...
    arena web traces --tasks T ... [--teacher scripted|openai] [--backend twin|browser]
                [--episodes N] [--error-rate P] [--workers N] --out DIR
    arena web prm-data (--tasks T ... | --traces FILE) [--episodes N] [--seed S]
                [--error-rate P] [--rejected K] [--pair-seed S] --out DIR
    arena prm train DATA --out RUN [--model smollm2|tiny] [--lora-rank R] [--steps N]
    arena prm bench RUN|base|random|outcome|oracle|judge --data DIR [--limit N] [--out FILE]
                [--judge-url URL --judge-model M [--judge-key-env VAR]]
    arena prm best-of-n RUN --policy LM_RUN [--n 1 2 4 8] [--episodes N] [--out FILE]
    arena volleyball demos [--episodes N] [--batch N] [--seed S] --out FILE.npz
    arena sweep NAME [--samples N] [--max-concurrent K] [--address A] [--out DIR] [--resume]
                [--set key=value ...]
    arena sweep --watch SWEEP_DIR
    arena report SWEEP_DIR [--out report.html]

Each package registers its subcommands (``<package>/commands.py``: ``register(subparsers)``,
with ``arena_handler="module:function"``, imported only when that command runs), so
``arena --help`` and ``arena SUB --help`` import no torch, RLlib or Serve.

Bad input (an unknown env id or ``--set`` key, a value of the wrong type, a run without a
checkpoint) prints one line and exits with status 2; any other ``ValueError`` or
``RecursionError`` does too, as ``arena: error: TYPE: message`` (``--verbose`` shows its
traceback). Library warnings are hidden unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

COMMANDS = (
    "envs.commands",
    "envs.web.commands",
    "envs.mmwalk.commands",
    "envs.volleyball.commands",
    "training.commands",
    "serve.commands",
    "cluster.commands",
    "tune.commands",
)
"""Modules whose ``register(subparsers)`` adds subcommands, in ``--help`` order."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="arena", description="Multi-agent training on Ray.")
    p.add_argument(
        "--verbose", action="store_true", help="show library warnings and Ray's own logs"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(sub)
    for command in sub.choices.values():  # also after the subcommand: arena train ... --verbose
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS)
    return p


def handler(ref: str):
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


MAX_ERROR = 540
"""Characters of an error message printed (the rest is cut: a message may quote the input)."""


def one_line(text: str, limit: int = MAX_ERROR) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    p = parser()
    args = p.parse_args(argv)
    args.arena_parser = p  # `arena submit` checks the command it sends with it
    if not args.verbose:
        from training.quiet import quiet

        quiet()
    from envs.registry import EnvError
    from policies.algorithm import AlgorithmMismatch
    from training.checkpoints import RunError
    from training.config import ConfigError

    try:
        return handler(args.arena_handler)(args)
    except (ConfigError, RunError, EnvError, AlgorithmMismatch, FileNotFoundError) as e:
        if args.verbose:
            traceback.print_exc()
        print(f"arena: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except (ValueError, RecursionError) as e:
        # The safety net for bad input that no check above caught (a library's ValueError, a
        # parser's RecursionError): one line naming the error; --verbose shows where.
        if args.verbose:
            traceback.print_exc()
        text = one_line(f"{type(e).__name__}: {e}", MAX_ERROR - 40)
        print(f"arena: error: {text} (--verbose shows the traceback)", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"arena: interrupted; {e or 'resume with --resume RUN'}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader left (`arena envs --json | head`): what it read was enough. Point stdout
        # at /dev/null so the interpreter's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
