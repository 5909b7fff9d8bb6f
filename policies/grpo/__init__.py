"""GRPO for a language-model web agent (Shao et al. 2024, DeepSeekMath; as the web-agent
study of Vattikonda et al., NeurIPS 2025 uses it): ``group_size`` attempts at the same task
and page seed; advantage = reward - group mean (optionally / group std); every action turn
of an episode gets its episode's advantage (``discount`` < 1 shrinks earlier turns');
PPO-style ratio clipping with ``eps_low``/``eps_high``; k3 KL to the initial student off by
default (``beta``); groups whose rewards all agree dropped, counted and played again
(``resample_flat``); answers cut at ``model.max_new_tokens`` masked; log-probabilities at the sampling temperature.
With ``prm`` (an ``arena prm train`` run) a process reward model scores every sampled step
and its rewards add a dense, process advantage to the outcome one (DeepSeekMath's process
supervision, ``policies.lm.objective``); its judging is paid in ``flops_reward``.

``arena train websim/click-test-2-v0 --algo grpo --init RUN`` starts from a BC run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ray.rllib.utils.metrics import ENV_RUNNER_SAMPLING_TIMER, TIMERS

from policies.algorithm import AlgorithmInfo, AlgorithmMismatch
from policies.lm.algorithm import (
    LM_LOSSES,
    LM_METRICS,
    TEXT_AGENT,
    LMAlgorithm,
    LMSettings,
    configure_lm,
    declare_lm,
    load_init,
    training_tasks,
)
from policies.lm.evaluation import evaluate_text_agent
from policies.lm.module import MODULE_ID
from policies.lm.student import forward_flops
from policies.lm.turns import grpo_turns, mixed_groups


@dataclass
class GRPOSettings(LMSettings):
    """GRPO's settings (``--set key=value``); defaults follow the study where it found one."""

    init: str = ""
    """A BC (or GRPO) run directory to start from (its newest checkpoint), or one of its
    checkpoints (``RUN/checkpoints/iter_N``): that checkpoint's weights and FLOPs."""
    group_size: int = 8
    """Attempts per (task, seed) group (G)."""
    groups_per_iteration: int = 4
    """Groups sampled per iteration."""
    temperature: float = 1.0
    """Sampling temperature; training log-probs are taken at it too. The study found 0.25
    best for its Llama-3.1-8B student; SmolLM2 after BC on nine twin tasks gave 1 mixed
    group of 16 at 0.25 and 7 at 1.0 (docs/web.md), and flat groups teach nothing."""
    std_normalise: bool = False
    """Divide advantages by the group std (helps only without SFT, says the study)."""
    filter_zero_std: bool = True
    """Drop groups whose rewards all agree (they carry no signal)."""
    clip: bool = True
    """PPO ratio clipping."""
    eps_low: float = 0.2
    """Lower clip range (ratio >= 1 - eps_low)."""
    eps_high: float = 0.2
    """Upper clip range (DAPO uses 0.28)."""
    beta: float = 0.0
    """Weight of the k3 KL to the initial student (0: off, as the study and TRL)."""
    discount: float = 0.5
    """Turn k steps before the end gets discount**k of the episode's advantage (the study
    found about 0.5 best after SFT, > 0.9 without it)."""
    mask_truncated: bool = True
    """Leave out answers cut at model.max_new_tokens."""
    minibatch_size: int = 0
    """Turns per optimizer step (0: the whole iteration's batch in one step)."""
    backend: str = "twin"
    """Where groups are played: ``twin`` (in-process pages) or ``browser`` (the real MiniWoB++
    pages in headless Chromium, ``browsers`` at a time in each EnvRunner)."""
    browsers: int = 2
    """Chromium pages per EnvRunner with ``backend=browser``."""
    epochs: int = 1
    """Passes over each iteration's turns (DeepSeekMath's mu, TRL's num_iterations, verl's
    ppo_epochs); above 1 the ratio to the sampler's log-probs moves and clipping acts."""

    resample_flat: int = 2
    """Extra sampling rounds when groups come back flat (DAPO's dynamic sampling, Yu et al.
    2025): new groups are played for the missing mixed ones, up to this many times; 0 plays
    each iteration's groups once. Every round's episodes are paid and counted."""

    prm: str = ""
    """An ``arena prm train`` run: its process reward model scores every sampled step (dense
    rewards, ``policies.lm.objective.process_advantages``); empty: outcome rewards only."""
    prm_weight: float = 1.0
    """Weight of the process advantage added to the outcome advantage."""
    prm_checklist: str = "written"
    """``written``: the PRM writes each page's checklist from its first state (Web-Shepherd at
    test time, paid in FLOPs); ``twin``: the twin's expert checklist (an oracle's)."""

    curriculum: bool = False
    """Pick each group's task with weight p(1 - p) + 0.05, p the task's recent success in this
    EnvRunner's groups: more groups where outcomes are mixed (the others are flat)."""

    def problems(self) -> list[str]:
        bad = super().problems()
        if self.group_size < 2:
            bad.append(f"group_size={self.group_size} (>= 2: advantages are relative)")
        if self.groups_per_iteration < 1 or self.minibatch_size < 0 or self.epochs < 1:
            bad.append(
                f"groups_per_iteration={self.groups_per_iteration}, "
                f"minibatch_size={self.minibatch_size}, epochs={self.epochs} (>= 1, >= 0, >= 1)"
            )
        if self.backend not in ("twin", "browser") or self.browsers < 1:
            bad.append(f"backend={self.backend!r} (twin or browser), browsers={self.browsers}")
        if not (0 <= self.temperature <= 10):
            bad.append(f"temperature={self.temperature} (in [0, 10])")
        if not (0 < self.eps_low < 1 and 0 < self.eps_high and math.isfinite(self.eps_high)):
            bad.append(f"eps_low={self.eps_low}, eps_high={self.eps_high}")
        if not (self.beta >= 0 and math.isfinite(self.beta)):
            bad.append(f"beta={self.beta}")
        if not 0 <= self.resample_flat <= 100:
            bad.append(f"resample_flat={self.resample_flat} (an integer in [0, 100])")
        if not 0 < self.discount <= 1:
            bad.append(f"discount={self.discount} (in (0, 1])")
        from policies.prm import CHECKLISTS

        if self.prm and not (Path(self.prm) / "prm.json").is_file():
            bad.append(f"prm={self.prm!r} (an `arena prm train` run directory, with prm.json)")
        if self.prm and self.backend != "twin":
            bad.append(
                f"prm={self.prm!r} with backend={self.backend!r} (the PRM judges twin pages)"
            )
        if not (self.prm_weight >= 0 and math.isfinite(self.prm_weight)):
            bad.append(f"prm_weight={self.prm_weight} (>= 0)")
        if self.prm_checklist not in CHECKLISTS:
            bad.append(f"prm_checklist={self.prm_checklist!r} ({' or '.join(CHECKLISTS)})")
        return bad


def adopt_init_model(env_id: str, settings: GRPOSettings) -> GRPOSettings:
    """A run started from ``init`` trains that run's student: its model settings replace
    these, a LoRA adapter's included, and it trains on that run's tasks unless ``tasks``
    names others (an unreadable init run, or a LoRA one trained on another base than this
    machine's, is an error naming it)."""
    import yaml

    from policies.lm.algorithm import check_saved_base, init_source
    from policies.lm.student import StudentError, StudentSettings

    if not settings.init:
        return settings
    init = Path(settings.init)
    run_dir = init.parent.parent if init.parent.name == "checkpoints" else init
    path = run_dir / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text())
        algo = data["algo"]
        settings.model = StudentSettings(**data[algo]["model"])
        if not settings.tasks:
            settings.tasks = training_tasks(data["env"], LMSettings(tasks=data[algo]["tasks"]))
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise AlgorithmMismatch(
            f"--init {settings.init}: not a bc/grpo run directory ({path}: {e})"
        ) from None
    _, checkpoint = init_source(settings.init)  # and it has that checkpoint
    try:  # a LoRA adapter is of use only on the base it was trained on
        check_saved_base(checkpoint / "weights", settings.model, f"--init {settings.init}")
    except StudentError as e:
        raise AlgorithmMismatch(str(e)) from None
    return settings


class GRPOAlgorithm(LMAlgorithm):
    """GRPO: each iteration the EnvRunners play ``groups_per_iteration`` groups of
    ``group_size`` attempts; their turns carry group-relative advantages."""

    MODE = "grpo"

    def setup(self, config) -> None:
        super().setup(config)
        s = self.config.learner_config_dict
        if s.get("init"):
            state, flops = load_init(s["init"], self._student())
            weights = {MODULE_ID: {f"lm.{k}": v for k, v in state.items()}}
            self.learner_group.set_weights(weights)
            self.learner_group.foreach_learner(lambda learner: learner.snapshot_reference())
            self._sync()
            self.counters["flops_init"] = flops

    def turns(self, s: dict) -> tuple[list[dict], int, dict]:
        episodes, rounds = [], 0
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            # DAPO's dynamic sampling: flat groups carry no signal, so new groups are played
            # for the missing mixed ones, up to resample_flat extra rounds (all of it paid).
            while rounds <= s["resample_flat"]:
                missing = s["groups_per_iteration"] - mixed_groups(episodes)
                if missing <= 0:
                    break
                played = self._play_groups(missing, s["group_size"], s["temperature"])
                episodes += [{**e, "group": (rounds, *e["group"])} for e in played]
                rounds += 1
        if not episodes:
            return [], 0, {}
        turns, stats = grpo_turns(episodes, s)
        stats["sampling_rounds"] = rounds
        self.counters["flops_reward"] += sum(e.get("reward_flops", 0.0) for e in episodes)
        self.counters["flops_sampling"] += forward_flops(
            self.params, sum(e["tokens"] for e in episodes)
        )
        return turns, sum(e["length"] for e in episodes), stats

    def _play_groups(self, groups: int, G: int, T: float) -> list[dict]:
        """``groups`` groups of ``G`` episodes, split over the EnvRunners; group ids
        ``(runner, g)``, unique across runners."""
        group = self.env_runner_group
        if group.num_remote_env_runners() == 0:
            parts = [group.local_env_runner.sample_groups(groups, G, T)]
        else:
            per = -(-groups // group.num_remote_env_runners())
            parts = group.foreach_env_runner(
                lambda r: r.sample_groups(per, G, T), local_env_runner=False
            )
        return [{**e, "group": (i, e["group"])} for i, part in enumerate(parts) for e in part]


def status(row: dict) -> tuple[str, str | None]:
    """The groups an iteration learnt from, and what to change when it learnt from none."""
    sampled, mixed = row.get("groups_sampled", math.nan), row.get("groups_mixed", math.nan)
    if not (math.isfinite(sampled) and math.isfinite(mixed)):
        return "", None
    text = f"mixed groups {int(mixed)}/{int(sampled)}"
    if mixed > 0:
        return text, None
    solved, failed = int(row["groups_flat_solved"]), int(row["groups_flat_failed"])
    if failed == 0:
        hint = "every attempt succeeds: raise temperature, or train on harder tasks"
    elif solved == 0:
        hint = "every attempt fails: start from a stronger BC run (--init), or raise temperature"
    else:
        hint = "raise temperature, or curriculum=true to pick the tasks whose groups are mixed"
    return text, (
        f"every group was flat ({solved} all succeeded, {failed} all failed), "
        f"so no update was made; {hint}"
    )


def declare(env_id: str, settings: GRPOSettings, opts):
    return declare_lm(env_id, settings, opts, settings.temperature)


def configure(env_id: str, settings: GRPOSettings, modules, opts):
    return configure_lm(GRPOAlgorithm, env_id, settings, modules, opts)


ALGORITHM = AlgorithmInfo(
    name="grpo",
    description="GRPO for a language-model student on web tasks (from a BC run with --init)",
    settings=GRPOSettings,
    capabilities=TEXT_AGENT,
    prepare=adopt_init_model,
    declare=declare,
    configure=configure,
    metrics=LM_METRICS,
    losses=LM_LOSSES,
    default_iterations=20,
    evaluate=evaluate_text_agent,
    status=status,
    example_env="websim/click-test-2-v0",
)
