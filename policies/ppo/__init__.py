"""PPO on Arena's fast sampler: the settings and the builder that ippo and mappo share.

RLlib's PPO learner (clipped surrogate, GAE, value bootstrapping on truncation) trains
:class:`policies.modules.ActorCritic` modules, one per entry of the agent -> module mapping
(``policies.mapping``), on batches from ``policies.sampling.VectorEnvRunner``: whole arrays
with GAE done in the sampler (``policies.ppo.array_path``), flat rows for feed-forward modules
and fixed-length chunks for recurrent ones.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import COMPONENT_RL_MODULE
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

import envs
from policies.algorithm import AlgorithmMismatch, RunOptions
from policies.batch import BatchSpec
from policies.diversity import METRICS as DIVERSITY_METRICS
from policies.diversity import DiversityCallback
from policies.mapping import plan_modules, slot_to_dict
from policies.modules import ActorCritic, ModelSettings, shown, stacking_problem
from policies.ppo.array_path import ArrayPPO
from policies.ppo.learner import (
    ADVANTAGE_NORMS,
    MINIBATCHES_KEY,
    THREADS_KEY,
    VALUE_CLIPS,
    VALUE_LOSSES,
    ArrayPPOLearner,
    LossSettings,
)
from policies.sampling import VectorEnvRunner
from policies.testing import TEST_METRICS, GreedyTests, default_interval

PPO_METRICS = (*DIVERSITY_METRICS, *TEST_METRICS)
"""The columns a PPO-family run adds to ``metrics.csv``: policy diversity and greedy tests."""


MAX_LR = 1.0
"""The largest learning rate (Adam's steps are about lr in size: above 1 nothing is learned)."""
MAX_COEFF = 1e3
"""The largest loss coefficient (entropy, value, KL)."""


HINTS = {
    "value_loss": f"{'/'.join(VALUE_LOSSES)}; huber not with value_clip=loss",
    "huber_delta": "> 0",
    "advantage_norm": "active_batch with model.seeds=1 only",
    "policy_active_masks": "with model.seeds=1 only",
    "value_active_masks": "with model.seeds=1 only",
    "grad_clip_per_network": "with model.seeds=1 only",
    "demos": "with model.seeds=1 and without model.value_norm",
}
"""What the message of a bad value adds for the settings the general rule does not cover."""


@dataclass
class PPOSettings:
    """Hyper-parameters of PPO (``--set key=value`` fills these; ``model.KEY`` the network)."""

    lr: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_param: float = 0.2
    """PPO surrogate clip range."""
    vf_clip_param: float = 0.2
    """Clip range of the value loss (see ``value_clip``)."""
    value_clip: str = "change"
    """How the value loss is clipped: ``change`` (the value moves at most ``vf_clip_param``
    from the sampled one; PPO2, CleanRL, JaxMARL, MAPPO), ``loss`` (RLlib's: the squared error
    clamped at ``vf_clip_param``, e.g. 10) or ``none``."""
    advantage_norm: str = "minibatch"
    """Where advantages are standardised: per ``minibatch`` (CleanRL, JaxMARL), over the
    ``batch`` (RLlib's), over the batch's rows of live agents (``active_batch``, MAPPO's) or
    ``none``."""
    value_loss: str = "squared"
    """The value error's loss: ``squared`` or ``huber`` (MAPPO's ``use_huber_loss``, with
    ``huber_delta``; clipped as ``value_clip`` says: ``change`` or ``none``)."""
    huber_delta: float = 10.0
    """The Huber loss's delta (MAPPO's ``huber_delta``)."""
    policy_active_masks: bool = False
    """Policy loss and entropy average over the rows of live agents only (MAPPO's
    ``use_policy_active_masks``; the env says who is alive, e.g. SMAC; others: every row)."""
    value_active_masks: bool = False
    """The value loss averages over the rows of live agents only (``use_value_active_masks``)."""
    grad_clip_per_network: bool = False
    """Clip the actor's and the critic's gradient norms to ``grad_clip`` apart (MAPPO's separate
    actor and critic optimisers), not their joint norm. One seed (``model.seeds=1``)."""
    adam_eps: float = 1e-5
    """Adam's epsilon (CleanRL, JaxMARL: 1e-5; torch's and RLlib's default: 1e-8)."""
    learner_threads: int = 1
    """torch threads of the learner's SGD. One seed's feed-forward minibatches are too small
    to gain from more; ``model.seeds`` stacked seeds' are not (2 threads on 2 cores: 1.65x
    per SGD step at 10 seeds, measured), nor a recurrent module's (1.46x end to end with
    MAPPO's ``paper=true`` on SMAC 3m, docs/performance.md)."""
    entropy_coeff: float = 0.01
    """Entropy bonus weight."""
    vf_loss_coeff: float = 0.5
    """Value loss weight."""
    kl_coeff: float = 0.0
    """Initial KL penalty weight (0 turns the KL term off, as in MAPPO)."""
    grad_clip: float = 0.5
    """Global gradient-norm clip."""
    train_batch_size: int = 4000
    """Env steps per training iteration (all agents of an env step count once)."""
    minibatch_size: int = 512
    """Agent steps (rows of one module) per SGD minibatch (at most ``train_batch_size``, as
    RLlib requires)."""
    num_minibatches: int = 0
    """Minibatches per epoch of each module's batch, of equal size whatever the module's
    number of agents (JaxMARL's and HyperMARL's ``NUM_MINIBATCHES``: a shared module of 4
    agents then takes minibatches 4x the rows of a per-agent module's; a recurrent module's
    batch is split by whole chunks, as on-policy's ``num_mini_batch``). 0: ``minibatch_size``
    rows each."""
    num_epochs: int = 5
    """SGD passes over each batch."""
    num_envs_per_env_runner: int = 64
    """Envs each EnvRunner steps as one batch."""
    model: ModelSettings = field(default_factory=ModelSettings)
    """The network of each module."""
    demos: str = ""
    """A demonstrations ``.npz`` (``envs.demos``) the trained modules clone before a new run's
    first iteration (``policies.ppo.demos``); empty: start from scratch. Read only then: a
    resumed run, or a run's weights loaded elsewhere, do not need the file."""
    demo_epochs: int = 30
    """Passes over the demonstrations when cloning them."""
    demo_log_std: float = -1.5
    """The Gaussian's log standard deviation after cloning (exploration around the clone)."""
    test_interval: int | None = None
    """Env steps between greedy test episodes (PyMARL's ``test_interval``; the first after the
    first iteration), logged as ``test_return_mean`` and ``test_battle_won_mean``. None:
    10,000 on SMAC and SMACv2 envs, none elsewhere; 0: none."""
    test_nepisode: int = 32
    """Greedy episodes per test (PyMARL's ``test_nepisode``)."""

    def validate(self) -> None:
        finite = all(
            math.isfinite(getattr(self, k))
            for k in (
                "lr",
                "gamma",
                "gae_lambda",
                "clip_param",
                "vf_clip_param",
                "entropy_coeff",
                "vf_loss_coeff",
                "kl_coeff",
                "grad_clip",
                "adam_eps",
                "huber_delta",
            )
        )
        # Upper bounds too: lr=1e30 trains without a NaN, to useless weights.
        checks = {
            "lr": 0 < self.lr <= MAX_LR,
            "gamma": 0 < self.gamma <= 1,
            "gae_lambda": 0 <= self.gae_lambda <= 1,
            "clip_param": self.clip_param > 0,
            "vf_clip_param": self.vf_clip_param > 0,
            "entropy_coeff": 0 <= self.entropy_coeff <= MAX_COEFF,
            "vf_loss_coeff": 0 <= self.vf_loss_coeff <= MAX_COEFF,
            "kl_coeff": 0 <= self.kl_coeff <= MAX_COEFF,
            "grad_clip": self.grad_clip > 0,
            "value_clip": self.value_clip in VALUE_CLIPS,
            "advantage_norm": self.advantage_norm in ADVANTAGE_NORMS
            and not (self.advantage_norm == "active_batch" and self.model.seeds > 1),
            # masked means over all seeds' rows would weigh each seed by its live rows
            "policy_active_masks": not (self.policy_active_masks and self.model.seeds > 1),
            "value_active_masks": not (self.value_active_masks and self.model.seeds > 1),
            "value_loss": self.value_loss in VALUE_LOSSES
            and not (self.value_loss == "huber" and self.value_clip == "loss"),
            "huber_delta": self.huber_delta > 0,
            "grad_clip_per_network": not (self.grad_clip_per_network and self.model.seeds > 1),
            "adam_eps": 0 < self.adam_eps <= 1,
            "learner_threads": 0 < self.learner_threads <= 256,
            "train_batch_size": self.train_batch_size > 0,
            "minibatch_size": 0 < self.minibatch_size <= self.train_batch_size,
            "num_epochs": self.num_epochs > 0,
            "num_minibatches": 0 <= self.num_minibatches <= 4096,
            "demo_epochs": self.demo_epochs > 0,
            "demo_log_std": -5 <= self.demo_log_std <= 1,
            "test_interval": self.test_interval is None or self.test_interval >= 0,
            "test_nepisode": 0 < self.test_nepisode <= 4096,
            # More envs than a batch has env steps would sample nothing useful (and allocate
            # rollout buffers for every one of them).
            "num_envs_per_env_runner": 0 < self.num_envs_per_env_runner <= self.train_batch_size,
            # cloning demonstrations trains one network, not one block of rows per seed
            # ... nor a critic in normalised units (its targets are the return's)
            "demos": not (self.demos and (self.model.seeds > 1 or self.model.value_norm)),
        }
        bad = [
            f"{k}={shown(getattr(self, k))}" + (f" ({HINTS[k]})" if k in HINTS else "")
            for k, ok in checks.items()
            if not ok
        ]
        if not finite:
            bad.append("a float that is not finite")
        bad += self.model.problems()
        if bad:
            raise ValueError(
                f"bad value for {', '.join(bad)} (rates, clips and sizes must be positive and "
                f"finite, lr <= {MAX_LR:g}, coefficients in [0, {MAX_COEFF:g}], gamma in (0, 1], "
                "gae_lambda in [0, 1], "
                "minibatch_size and num_envs_per_env_runner <= train_batch_size, demo_log_std "
                "in [-5, 1], test_interval >= 0, test_nepisode in 1..4096, value_clip in "
                f"{'/'.join(VALUE_CLIPS)}, advantage_norm in {'/'.join(ADVANTAGE_NORMS)}, "
                "adam_eps in (0, 1], learner_threads in 1..256, demos only with model.seeds=1, "
                "num_minibatches in 0..4096)"
            )


def declare_ppo(
    env_id: str,
    settings: PPOSettings,
    opts: RunOptions,
    *,
    centralised_critic: bool,
    module_class: type = ActorCritic,
    extra_config: dict | None = None,
) -> MultiRLModuleSpec:
    """One ``module_class`` spec (an :class:`ActorCritic`) per module of ``env_id`` under
    ``opts.sharing``, ``extra_config`` added to each ``model_config``.

    Args:
        centralised_critic: the critic reads the global state and agent id (MAPPO).
        module_class / extra_config: the modules' class and what it adds to their
            ``model_config``.
    """
    vec = envs.make_vector(env_id, 1, **opts.env_config)
    try:
        slots = plan_modules(vec.groups, opts.sharing, env_id)
    except ValueError as e:
        raise AlgorithmMismatch(str(e)) from None
    # a state per agent (state_space (N, S)) gives each agent's critic row its own
    state_dim = int(vec.state_space.shape[-1]) if centralised_critic else 0
    # The one-hot agent id goes in where a network reads it: MAPPO's critic, FuPS+ID, or a
    # module that picks per-agent weights by it (HyperMARL).
    with_ids = bool(state_dim) or settings.model.agent_id or module_class.READS_AGENT_ID
    model = asdict(settings.model)
    specs = {}
    for mid, slot in slots.items():
        mask_dim = int(slot.action_space.n) if slot.masked else 0
        spec = BatchSpec.for_space(
            slot.observation_space,
            mask_dim=mask_dim,
            state_dim=state_dim,
            num_ids=slot.num_agents if with_ids else 0,
        )
        why = stacking_problem(module_class, spec) if settings.model.seeds > 1 else None
        if why:
            raise AlgorithmMismatch(
                f"model.seeds={settings.model.seeds}: stacked seeds need feed-forward "
                f"ActorCritic modules on vector observations, not {why}"
            )
        model_config = {
            "batch_spec": spec.to_dict(),
            "model": model,
            "slot": slot_to_dict(slot),
            **(extra_config or {}),
        }
        if settings.model.recurrent:
            model_config["max_seq_len"] = settings.model.max_seq_len
        specs[mid] = RLModuleSpec(
            module_class=module_class,
            observation_space=spec.space(),
            action_space=slot.action_space,
            model_config=model_config,
        )
    return MultiRLModuleSpec(rl_module_specs=specs)


def configure_ppo(
    env_id: str, settings: PPOSettings, modules: MultiRLModuleSpec, opts: RunOptions
) -> PPOConfig:
    """The RLlib config that trains ``modules`` (from :func:`declare_ppo`) on ``env_id`` with
    PPO on the sampler's arrays with GAE done where they were sampled
    (``policies.ppo.array_path``; recurrent modules in chunks of ``model.max_seq_len``)."""
    names = list(modules.rl_module_specs)
    trained = [m for m in names if m not in opts.frozen]
    check_sampler_memory(modules, settings, opts.num_env_runners)
    mapping = agent_to_module_from_specs(modules)
    return (
        PPOConfig(algo_class=ArrayPPO)
        .environment(env=env_id, env_config=opts.env_config)
        .framework("torch")
        .env_runners(
            env_runner_cls=VectorEnvRunner,
            num_env_runners=opts.num_env_runners,
            # stacked seeds: each runner steps num_envs_per_env_runner envs per seed
            num_envs_per_env_runner=settings.num_envs_per_env_runner * settings.model.seeds,
            rollout_fragment_length="auto",
            num_cpus_per_env_runner=1,
            merge_env_runner_states=False,
            broadcast_env_runner_states=False,
        )
        .learners(num_learners=opts.learners, num_gpus_per_learner=opts.gpus_per_learner)
        .rl_module(rl_module_spec=modules)
        .multi_agent(
            policies=list(names),
            policy_mapping_fn=lambda agent_id, *args, **kwargs: mapping[agent_id],
            policies_to_train=trained,
        )
        .training(
            lr=settings.lr,
            gamma=settings.gamma,
            lambda_=settings.gae_lambda,
            clip_param=settings.clip_param,
            # RLlib's own loss (episodes handed to the learner) clamps only under value_clip=loss
            vf_clip_param=settings.vf_clip_param if settings.value_clip == "loss" else math.inf,
            entropy_coeff=settings.entropy_coeff,
            vf_loss_coeff=settings.vf_loss_coeff,
            kl_coeff=settings.kl_coeff,
            use_kl_loss=settings.kl_coeff > 0,
            grad_clip=settings.grad_clip,
            # stacked seeds: every seed samples and learns from a whole batch
            train_batch_size_per_learner=max(
                1, settings.train_batch_size * settings.model.seeds // max(1, opts.learners)
            ),
            minibatch_size=settings.minibatch_size,
            num_epochs=settings.num_epochs,
            learner_config_dict={
                "greedy_tests": greedy_tests(env_id, settings),
                LossSettings.KEY: loss_settings(settings).as_dict(),
                THREADS_KEY: settings.learner_threads,
                MINIBATCHES_KEY: settings.num_minibatches,
            },
            learner_class=ArrayPPOLearner,
        )
        .callbacks([DiversityCallback, GreedyTests])
        .reporting(metrics_num_episodes_for_smoothing=100)
        .debugging(seed=opts.seed)
    )


def loss_settings(settings: PPOSettings) -> LossSettings:
    """The loss choices :class:`ArrayPPOLearner` reads: the same-named settings, and the KL
    term on where its coefficient is."""
    same = {
        f.name: getattr(settings, f.name) for f in fields(LossSettings) if f.name != "use_kl_loss"
    }
    return LossSettings(**same, use_kl_loss=settings.kl_coeff > 0)


def greedy_tests(env_id: str, settings: PPOSettings) -> dict[str, int]:
    """The cadence :class:`policies.testing.GreedyTests` reads."""
    interval = settings.test_interval
    if interval is None:
        interval = default_interval(env_id)
    return {"interval": interval, "episodes": settings.test_nepisode}


def sampler_bytes(multi: MultiRLModuleSpec, settings: PPOSettings, num_env_runners: int) -> int:
    """Bytes one EnvRunner's rollout buffers take per iteration: ``T + 1`` steps of every
    module's input rows (T = the env steps each of its envs takes per batch), plus actions,
    rewards and log-probabilities. Stacked seeds: ``model.seeds`` times the envs, each seed
    sampling ``train_batch_size`` env steps."""
    E = settings.num_envs_per_env_runner
    B = E * settings.model.seeds
    T = -(-settings.train_batch_size // (E * max(1, num_env_runners)))
    total = 0
    for spec in multi.rl_module_specs.values():
        fields = BatchSpec.from_dict(spec.model_config["batch_spec"]).fields()
        row = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in fields.values())
        rows = B * len(spec.model_config["slot"]["agents"])
        total += (T + 1) * rows * (row + 64)  # + actions, logits, rewards, bookkeeping
    return total


def check_sampler_memory(multi, settings: PPOSettings, num_env_runners: int) -> None:
    """Refuses a batch whose rollout buffers would not fit half this machine's memory."""
    need = sampler_bytes(multi, settings, num_env_runners)
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have // 2:
        raise AlgorithmMismatch(
            f"train_batch_size={settings.train_batch_size} with "
            f"num_envs_per_env_runner={settings.num_envs_per_env_runner} "
            f"(x model.seeds={settings.model.seeds}) needs about "
            f"{need / 2**30:.1f} GiB of rollout buffers per EnvRunner; this machine has "
            f"{have / 2**30:.1f} GiB: use a smaller batch"
        )


def agent_to_module_from_specs(multi: MultiRLModuleSpec) -> dict[str, str]:
    """agent -> module id, read back from the module specs (what eval and serve use)."""
    return {
        agent: mid
        for mid, spec in multi.rl_module_specs.items()
        for agent in spec.model_config["slot"]["agents"]
    }


def set_module_weights(algo, weights: dict[str, dict]) -> None:
    """Sets modules' weights (``module id -> state dict``) in the Learners and every
    EnvRunner: how a frozen module (a self-play opponent) gets its weights from outside."""
    algo.learner_group.set_weights(weights)
    state = {COMPONENT_RL_MODULE: weights}  # no weights seq no: every runner applies it
    algo.env_runner_group.foreach_env_runner(lambda r: r.set_state(state), local_env_runner=True)
