"""Behaviour cloning and GRPO of a language-model student as one RLlib Algorithm (new API
stack): ``training_step`` either takes a minibatch of teacher-trace turns (``bc``) or has the
EnvRunners play groups of attempts and turns them into group-relative advantages
(``grpo``); the :class:`policies.lm.learner.LMLearner` updates the student; weights go back
to the runners. Every stage adds its FLOPs to the run's counters (``policies.lm.student``):
teacher inference for the traces, student sampling, student training, and for a GRPO run
started from a BC run (``init``) that run's total.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    TIMERS,
)

from policies.algorithm import AlgorithmMismatch
from policies.lm.learner import LMLearner
from policies.lm.module import MODULE_ID, LMModule
from policies.lm.objective import AGGREGATIONS
from policies.lm.play import TRAIN_SEEDS
from policies.lm.runner import TextEnvRunner
from policies.lm.student import StudentSettings, forward_flops, train_flops
from policies.lm.turns import (
    grpo_turns,
    read_traces,
    stream_indices,
    teacher_share,
    turn_batch,
)

COUNTERS = ("flops_teacher", "flops_init", "flops_sampling", "flops_train")
LM_METRICS = (
    "success_rate",
    "eval_success",
    "eval_auc",
    "flops_total",
    "flops_teacher",
    "flops_sampling",
    "flops_train",
    "zero_std_share",
    "answer_tokens",
)
"""What the LM algorithms add to ``metrics.csv`` (``result["arena"]``)."""


@dataclass
class LMSettings:
    """Settings both language-model algorithms have."""

    lr: float = 1e-4
    """Adam learning rate (the study's 1e-6 is for an 8B student; 135M wants more)."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    tasks: list[str] = field(default_factory=list)
    """More twin tasks to train on, besides the run's env (``click-test``, ``login-user``...)."""
    eval_every: int = 5
    """Iterations between greedy evaluations on held-out seeds (0: never)."""
    eval_seeds: int = 16
    """Held-out page seeds per task in each evaluation."""
    loss_agg: str = "token-mean"
    """token-mean, seq-mean-token-mean or constant (``policies.lm.objective``)."""
    model: StudentSettings = field(default_factory=StudentSettings)
    """The student."""

    def problems(self) -> list[str]:
        bad = []
        if not (self.lr > 0 and math.isfinite(self.lr)):
            bad.append(f"lr={self.lr!r}")
        if not (self.grad_clip > 0 and math.isfinite(self.grad_clip)):
            bad.append(f"grad_clip={self.grad_clip!r}")
        if self.eval_every < 0 or self.eval_seeds < 1:
            bad.append(f"eval_every={self.eval_every}, eval_seeds={self.eval_seeds}")
        if self.loss_agg not in AGGREGATIONS:
            bad.append(f"loss_agg={self.loss_agg!r} (one of {', '.join(AGGREGATIONS)})")
        from envs.web import TWIN_TASKS

        unknown = [t for t in self.tasks if t not in TWIN_TASKS]
        if unknown:
            bad.append(f"tasks={unknown} (twin tasks: {', '.join(TWIN_TASKS)})")
        return bad + self.model.problems()

    def validate(self) -> None:
        bad = self.problems()
        if bad:
            raise ValueError(f"bad value for {', '.join(bad)}")


def training_tasks(env_id: str, settings: LMSettings) -> list[str]:
    """The run's env's task first, then ``settings.tasks`` (no repeats)."""
    from envs.web import TWIN_TASKS

    family, _, rest = env_id.partition("/")
    task = rest.rsplit("-v", 1)[0]
    if family != "websim" or task not in TWIN_TASKS:
        raise AlgorithmMismatch(
            f"the language-model algorithms train on the web twin (websim/<task>-v0, tasks: "
            f"{', '.join(TWIN_TASKS)}), got {env_id!r}; real pages (web/...) are for "
            "`arena eval`"
        )
    return list(dict.fromkeys([task, *settings.tasks]))


def module_spec(settings: LMSettings, seed: int, temperature: float) -> MultiRLModuleSpec:
    from envs.web.env import TextSpace

    spec = RLModuleSpec(
        module_class=LMModule,
        observation_space=TextSpace(),
        action_space=TextSpace(1024),
        model_config={
            "student": asdict(settings.model),
            "seed": int(seed or 0),
            "temperature": float(temperature),
            "slot": {"agents": ["agent_0"]},
        },
    )
    return MultiRLModuleSpec(rl_module_specs={MODULE_ID: spec})


class LMConfig(AlgorithmConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or LMAlgorithm)

    def get_default_learner_class(self):
        return LMLearner

    def get_default_rl_module_spec(self):
        return RLModuleSpec(module_class=LMModule)


def build_lm(
    env_id: str,
    settings: LMSettings,
    learner: dict,
    *,
    env_config: dict | None = None,
    num_env_runners: int = 0,
    seed: int | None = 0,
    sharing: str = "auto",
    frozen: tuple[str, ...] = (),
    learners: int = 0,
    gpus_per_learner: float = 0.0,
) -> LMConfig:
    """The RLlib config of a BC or GRPO run; ``learner`` is the mode's own part of
    ``learner_config_dict``."""
    try:
        settings.validate()
    except ValueError as e:
        raise AlgorithmMismatch(f"{learner['mode']}: {e}") from None
    if frozen:
        raise AlgorithmMismatch(f"{learner['mode']} trains its one module; nothing to freeze")
    tasks = training_tasks(env_id, settings)
    temperature = learner.get("temperature", 1.0)
    cfg = {
        **learner,
        "tasks": tasks,
        "loss_agg": settings.loss_agg,
        "max_new_tokens": settings.model.max_new_tokens,
        "eval_every": settings.eval_every,
        "eval_seeds": settings.eval_seeds,
        "temperature": temperature,
    }
    return (
        LMConfig()
        .environment(env=None, env_config=dict(env_config or {}))
        .framework("torch")
        .env_runners(
            env_runner_cls=TextEnvRunner,
            num_env_runners=num_env_runners,
            num_cpus_per_env_runner=1,
        )
        .learners(
            num_learners=learners, num_gpus_per_learner=gpus_per_learner, learner_config_dict=cfg
        )
        .rl_module(rl_module_spec=module_spec(settings, seed, temperature))
        .multi_agent(
            policies={MODULE_ID},
            policy_mapping_fn=lambda agent_id, *a, **k: MODULE_ID,
        )
        .training(lr=settings.lr, grad_clip=settings.grad_clip)
        .debugging(seed=seed)
    )


def init_source(init: str) -> tuple[Path, Path]:
    """The run directory and checkpoint ``init`` names: a run (its newest checkpoint) or one
    of its checkpoints, ``RUN/checkpoints/iter_N`` (a branch point part-way into BC)."""
    path = Path(init)
    if path.parent.name == "checkpoints":
        if not (path / "arena.json").is_file():
            raise AlgorithmMismatch(f"--init {init}: not a checkpoint (no arena.json)")
        return path.parent.parent, path
    latest = path / "checkpoints" / "latest"
    if not latest.is_file():
        raise AlgorithmMismatch(
            f"--init {init}: the run has no checkpoint yet (no checkpoints/latest)"
        )
    return path, path / "checkpoints" / latest.read_text().strip()


def load_init(init: str, student_keys: dict) -> tuple[dict, float]:
    """The student weights of ``init``'s checkpoint (plain tensors, never unpickled code) and
    the FLOPs its run had spent at that checkpoint."""
    run_dir, checkpoint = init_source(init)
    path = checkpoint / "weights" / f"{MODULE_ID}.pt"
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except (OSError, RuntimeError) as e:
        raise AlgorithmMismatch(f"--init {init}: cannot read {path} ({e})") from None
    state = {k.removeprefix("lm."): v for k, v in state.items()}
    want = {k: tuple(v.shape) for k, v in student_keys.items()}
    have = {k: tuple(v.shape) for k, v in state.items()}
    if want != have:
        raise AlgorithmMismatch(
            f"--init {init}: its student is not this run's (different model settings)"
        )
    iteration = int(json.loads((checkpoint / "arena.json").read_text())["iteration"])
    flops = 0.0
    metrics = run_dir / "metrics.csv"
    if metrics.is_file():
        with metrics.open() as f:
            rows = [r for r in csv.DictReader(f) if r.get("iteration") == str(iteration)]
        if rows and rows[-1].get("flops_total"):
            flops = float(rows[-1]["flops_total"])
    return state, flops


class LMAlgorithm(Algorithm):
    """BC or GRPO (``learner_config_dict["mode"]``); see the module docstring."""

    @classmethod
    def get_default_config(cls) -> AlgorithmConfig:
        return LMConfig()

    def setup(self, config) -> None:
        super().setup(config)
        s = self.config.learner_config_dict
        self.mode, self.tasks = s["mode"], s["tasks"]
        self.counters = dict.fromkeys(COUNTERS, 0.0)
        self.evals: list[float] = []
        self._drawn = 0  # trace turns BC has drawn, lifetime: where it is in its stream
        student = self._student()
        self.params, self.pad = student.params, student.tok.pad_id
        if self.mode == "bc":
            steps, total = read_traces(Path(s["traces"]), s["successes_only"])
            if not steps:
                raise AlgorithmMismatch(f"{s['traces']}: no successful trace steps to clone")
            self.turns = [
                {"prompt": student.prompt(r["observation"], r["history"]),
                 "answer": student.answer(r["action"])}
                for r in steps
            ]  # fmt: skip
            # The teacher read every prompt and wrote every answer of every trace, failed
            # ones included: charged at its size, as BC uses the traces (below).
            all_steps, _ = read_traces(Path(s["traces"]), successes_only=False)
            self.teacher_flops = forward_flops(
                s["teacher_params"],
                sum(
                    len(student.prompt(r["observation"], r["history"]))
                    + len(student.answer(r["action"]))
                    for r in all_steps
                ),
            )
            self.trace_steps = total
        elif s.get("init"):
            state, flops = load_init(s["init"], student.model.state_dict())
            weights = {MODULE_ID: {f"lm.{k}": v for k, v in state.items()}}
            self.learner_group.set_weights(weights)
            self.learner_group.foreach_learner(lambda learner: learner.snapshot_reference())
            self._sync()
            self.counters["flops_init"] = flops

    def _student(self):
        runner = self.env_runner_group.local_env_runner
        if runner is not None:
            return runner.student
        from policies.lm.student import Student

        spec = self.config.rl_module_spec.rl_module_specs[MODULE_ID]
        return Student.build(StudentSettings(**spec.model_config["student"]))

    # --- state (counters survive a resume) -------------------------------------------------
    def get_state(self, *args, **kwargs):
        state = super().get_state(*args, **kwargs)
        state["arena_lm"] = {
            "counters": dict(self.counters),
            "evals": list(self.evals),
            "drawn": self._drawn,
        }
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        lm = state.get("arena_lm")
        if lm:
            self.counters.update(lm["counters"])
            self.evals = list(lm["evals"])
            self._drawn = int(lm.get("drawn", 0))

    # --- one iteration ---------------------------------------------------------------------
    def training_step(self) -> None:
        s = self.config.learner_config_dict
        if self.mode == "bc":
            turns, env_steps, stats = self._bc_turns(s)
            self._drawn += len(turns)
            self.counters["flops_teacher"] = self.teacher_flops * teacher_share(
                self._drawn, len(self.turns)
            )
        else:
            turns, env_steps, stats = self._grpo_turns(s)
        self.metrics.log_value((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED), env_steps, reduce="sum")
        self.metrics.log_value(
            (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), env_steps, reduce="lifetime_sum"
        )
        for key in ("episode_return_mean", "episode_len_mean"):
            if key in stats:
                self.metrics.log_value((ENV_RUNNER_RESULTS, key), stats.pop(key), window=1)
        if turns:
            batch = turn_batch(turns, self.pad)
            epochs = s.get("epochs", 1)
            self._learn(batch, s.get("minibatch_size") or len(turns), epochs)
            tokens = epochs * int(batch["attention"].sum())
            self.counters["flops_train"] += train_flops(self.params, tokens)
        else:  # every group was flat: no update, so no learner results (not last time's)
            self.metrics.delete(LEARNER_RESULTS, key_error=False)
        every = s["eval_every"]
        if every and (self.iteration + 1) % every == 0:
            stats["eval_success"] = self._evaluate(s)
            self.evals.append(stats["eval_success"])
            stats["eval_auc"] = float(np.mean(self.evals))
        stats["flops_total"] = sum(self.counters.values())
        stats.update({k: v for k, v in self.counters.items() if k != "flops_init"})
        for key, value in stats.items():
            self.metrics.log_value(("arena", key), float(value), window=1)

    def _bc_turns(self, s) -> tuple[list[dict], int, dict]:
        """The next ``batch_size`` turns of the run's stream (``stream_indices``)."""
        n, seed = s["batch_size"], int(self.config.seed or 0)
        picked = [self.turns[i] for i in stream_indices(len(self.turns), seed, self._drawn, n)]
        return picked, n, {"answer_tokens": float(np.mean([len(t["answer"]) for t in picked]))}

    def _grpo_turns(self, s) -> tuple[list[dict], int, dict]:
        group = self.env_runner_group
        G, groups, T = s["group_size"], s["groups_per_iteration"], s["temperature"]
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            if group.num_remote_env_runners() == 0:
                parts = [group.local_env_runner.sample_groups(groups, G, T)]
            else:
                k = group.num_remote_env_runners()
                per = -(-groups // k)
                parts = group.foreach_env_runner(
                    lambda r: r.sample_groups(per, G, T), local_env_runner=False
                )
        episodes = []
        for i, part in enumerate(parts):  # group ids unique across runners
            episodes += [{**e, "group": (i, e["group"])} for e in part]
        if not episodes:
            return [], 0, {}
        turns, stats = grpo_turns(episodes, s)
        self.counters["flops_sampling"] += forward_flops(
            self.params, sum(e["tokens"] for e in episodes)
        )
        return turns, sum(e["length"] for e in episodes), stats

    def _learn(self, batch: dict, minibatch: int, epochs: int) -> None:
        from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

        n = len(batch["tokens"])
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            results = self.learner_group.update(
                batch=MultiAgentBatch({MODULE_ID: SampleBatch(batch)}, env_steps=n),
                timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: self.iteration},
                num_epochs=epochs,
                minibatch_size=min(minibatch, n),
            )
            self.metrics.aggregate(results, key=LEARNER_RESULTS)
        self._sync(set(results[0].keys()) - {ALL_MODULES})

    def _sync(self, policies=None) -> None:
        self.env_runner_group.sync_weights(
            from_worker_or_learner_group=self.learner_group,
            policies=policies or {MODULE_ID},
            inference_only=True,
        )

    def _evaluate(self, s) -> float:
        """Greedy success on held-out seeds of the training tasks."""
        seeds = list(range(TRAIN_SEEDS, TRAIN_SEEDS + s["eval_seeds"]))
        group = self.env_runner_group
        if group.num_remote_env_runners() == 0:
            eps = group.local_env_runner.evaluate(self.tasks, seeds)
        else:
            eps = group.foreach_env_runner(
                lambda r: r.evaluate(self.tasks, seeds),
                local_env_runner=False,
                remote_worker_ids=[1],
            )[0]
        return float(np.mean([e["success"] for e in eps]))
