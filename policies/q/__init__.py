"""Value-based MARL on Arena's sampler: the settings, modules and RLlib config that IQL, VDN
and QMIX share (``policies.iql``, ``policies.vdn``, ``policies.qmix`` each choose a mixer).

The defaults are PyMARL's published settings for SMAC (oxwhirl/pymarl at c971afd:
``src/config/default.yaml``, ``src/config/algs/{qmix,vdn,iql}.yaml`` and
``src/config/envs/sc2.yaml``): RMSprop at lr 5e-4 (alpha 0.99, eps 1e-5), batches of 32
episodes from a replay of 5,000, one env stepped per runner and one update per episode,
epsilon from 1.0 to 0.05 over 50,000 env steps, target networks copied every 200 episodes,
double Q, one-step targets, gradient norm clipped at 10, GRU agents of 64 units reading
their one-hot id and last action, QMIX's hypernetworks 2 layers of 64 with a mixing
embedding of 32, 32 greedy test episodes every 10,000 env steps.

``--set preset=pymarl2`` gives the fine-tuned settings of Hu et al., "Rethinking the
Implementation Tricks and Monotonicity Constraint in Cooperative Multi-Agent Reinforcement
Learning" (hijkzzz/pymarl2 at 8ccac7c: ``src/config/algs/{qmix,vdn,iql}.yaml``, the 0.5 of
the squared TD error in ``src/learners/{nq,q}_learner.py``): :data:`PYMARL2`.

The modules: one :class:`policies.q.module.QNetwork` per module of the agent -> module
mapping (``--policies``, as PPO's), and for QMIX the learner-only
:class:`policies.q.module.QMixer`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

import envs
from policies.algorithm import AlgorithmInfo, AlgorithmMismatch, Capabilities, RunOptions
from policies.batch import BatchSpec
from policies.mapping import plan_modules, slot_to_dict
from policies.modules import shown
from policies.q.module import QModelSettings, QNetwork
from policies.testing import TEST_METRICS

MIXER = "mixer"
"""The module id of a mixer's learner-only module (QMIX's hypernetworks)."""


@dataclass(frozen=True)
class Mixer:
    """How a value-based algorithm joins its agents' Q-values into the team's: what tells
    IQL, VDN and QMIX apart (and what a new variant brings in its own package).

    Attributes:
        name: as in the algorithm's description.
        mix: ``mix(qs [E, T, N], weights) -> Q_tot [E, T]``; None: no team value, every
            agent learns its own Q-value from the team reward (independent learners).
        module: optional ``module(settings, state_dim, n_agents) -> RLModuleSpec``: a
            learner-only module whose ``forward_train`` on the states ``[E, T + 1, S]`` gives
            the ``weights`` (and ``target_weights``) that ``mix`` takes.
        pymarl2: the knobs ``preset=pymarl2`` sets (hijkzzz/pymarl2's config for it).
        pymarl2_per_map: SMAC map -> knobs that pymarl2 changes for that map.
    """

    name: str
    mix: Callable | None = None
    module: Callable[..., RLModuleSpec] | None = None
    pymarl2: dict = field(default_factory=dict)
    pymarl2_per_map: dict = field(default_factory=dict)


Q_LOSSES = ("td_loss", "td_error_abs", "q_taken_mean", "target_mean", "grad_norm")
"""The Q-learner's metrics, a column per agent module (``policies.q.learner``)."""

Q_METRICS = ("epsilon", "replay_episodes", "updates", *TEST_METRICS)
"""What the Q algorithms add to ``metrics.csv``: the exploration rate, the replay's fill, the
updates so far, and the greedy test episodes' mean team return and win rate (PyMARL's
``test_return_mean`` and ``test_battle_won_mean``)."""


@dataclass
class QSettings:
    """Settings of IQL, VDN and QMIX (``--set key=value``); names as PyMARL's config."""

    preset: str = ""
    """``pymarl2``: Hu et al.'s fine-tuned settings (:data:`PYMARL2`); empty: PyMARL's."""
    lr: float = 5e-4
    """Learning rate."""
    optimizer: str = "rmsprop"
    """``rmsprop`` (PyMARL) or ``adam`` (pymarl2)."""
    optim_alpha: float = 0.99
    """RMSprop's smoothing constant."""
    optim_eps: float = 1e-5
    """RMSprop's epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    grad_norm_clip: float = 10.0
    """Global gradient-norm clip over all parameters."""
    batch_size: int = 32
    """Episodes per update."""
    buffer_size: int = 5000
    """Episodes the replay keeps."""
    batch_size_run: int = 1
    """Envs each EnvRunner steps together; one update follows every this many episodes
    (PyMARL's episode runner: 1; its parallel runner: 8)."""
    target_update_interval: int = 200
    """Episodes between copies of the target networks (0: move them by ``tau`` every update)."""
    tau: float = 0.005
    """Polyak rate of the target networks when ``target_update_interval`` is 0."""
    epsilon_start: float = 1.0
    epsilon_finish: float = 0.05
    epsilon_anneal_time: int = 50_000
    """Env steps over which epsilon falls linearly from start to finish."""
    double_q: bool = True
    """The target takes the target network's value of the online network's best action."""
    td_lambda: float = 0.0
    """TD(lambda) targets; 0: one-step targets."""
    loss_scale: float = 1.0
    """Multiplies the mean squared TD error (pymarl2 halves it)."""
    hysteresis: float = 1.0
    """Hysteretic Q-learning (Matignon, Laurent & Le Fort-Piat, IROS 2007; deep and
    recurrent as Omidshafiei et al.'s Dec-HDRQN, ICML 2017): a TD error that lowers a value
    (the target below the estimate) is learnt at this fraction of the rate of one that raises
    it, beta / alpha, so an independent learner is not dragged down by its partners'
    exploration. 1: plain Q-learning; Matignon et al. used alpha 0.1, beta 0.01 (0.1)."""
    mixing_embed_dim: int = 32
    """QMIX: width of the mixing network."""
    hypernet_layers: int = 2
    """QMIX: layers of the hypernetworks giving the mixing weights (1 or 2)."""
    hypernet_embed: int = 64
    """QMIX: hidden width of 2-layer hypernetworks."""
    team_reward: str = "mean"
    """The team reward of a step: ``mean`` or ``sum`` of the agents' rewards (SMAC gives every
    agent the team reward, so ``mean`` is SMAC's)."""
    env_steps_per_iteration: int = 2000
    """Env steps sampled per training iteration (one row of metrics.csv)."""
    rollout_steps: int = 20
    """Steps each env takes between updates: the policy that explores is at most this many
    steps old (PyMARL updates after every episode)."""
    test_interval: int = 10_000
    """Env steps between greedy test episodes (0: none)."""
    test_nepisode: int = 32
    """Greedy test episodes each time."""
    model: QModelSettings = field(default_factory=QModelSettings)
    """Each agent's Q-network."""

    def validate(self) -> None:
        floats = ("lr", "optim_alpha", "optim_eps", "gamma", "grad_norm_clip", "tau")
        floats += ("epsilon_start", "epsilon_finish", "td_lambda", "loss_scale", "hysteresis")
        checks = {
            "preset": self.preset in ("", *PRESETS),
            "lr": 0 < self.lr <= 1,
            "optimizer": self.optimizer in ("rmsprop", "adam"),
            "optim_alpha": 0 <= self.optim_alpha < 1,
            "optim_eps": 0 < self.optim_eps <= 1,
            "gamma": 0 < self.gamma <= 1,
            "grad_norm_clip": 0 < self.grad_norm_clip <= 1e6,
            "batch_size": 0 < self.batch_size <= self.buffer_size,
            "buffer_size": 0 < self.buffer_size <= 10_000_000,
            "batch_size_run": 0 < self.batch_size_run <= 4096,
            "target_update_interval": self.target_update_interval >= 0,
            "tau": 0 < self.tau <= 1,
            "epsilon_start": 0 <= self.epsilon_start <= 1,
            "epsilon_finish": 0 <= self.epsilon_finish <= 1,
            "epsilon_anneal_time": self.epsilon_anneal_time > 0,
            "td_lambda": 0 <= self.td_lambda <= 1,
            "loss_scale": 0 < self.loss_scale <= 1e3,  # a coefficient, as PPO's (<= 1e3)
            "hysteresis": 0 <= self.hysteresis <= 1,
            "mixing_embed_dim": 0 < self.mixing_embed_dim <= 4096,
            "hypernet_layers": self.hypernet_layers in (1, 2),
            "hypernet_embed": 0 < self.hypernet_embed <= 4096,
            "team_reward": self.team_reward in ("mean", "sum"),
            "env_steps_per_iteration": 0 < self.env_steps_per_iteration <= 10_000_000,
            "rollout_steps": 0 < self.rollout_steps <= 100_000,
            "test_interval": self.test_interval >= 0,
            "test_nepisode": 0 < self.test_nepisode <= 4096,
        }
        bad = [f"{k}={shown(getattr(self, k))}" for k, ok in checks.items() if not ok]
        if not all(math.isfinite(getattr(self, k)) for k in floats):
            bad.append("a float that is not finite")
        bad += self.model.problems()
        if bad:
            raise ValueError(
                f"bad value for {', '.join(bad)} (sizes and clips positive, lr, tau and optim_eps "
                "in (0, 1], loss_scale in (0, 1e3], "
                "gamma in (0, 1]; epsilons, td_lambda and hysteresis in [0, 1]; batch_size <= "
                "buffer_size <= "
                "10,000,000; optimizer rmsprop or adam; team_reward mean or sum; preset one of "
                f"{list(PRESETS)})"
            )


PYMARL2_COMMON = {
    "batch_size_run": 8,  # runner: parallel, batch_size_run: 8
    "buffer_size": 5000,
    "epsilon_anneal_time": 100_000,
    "target_update_interval": 200,
    "optimizer": "adam",
    "loss_scale": 0.5,  # learners: 0.5 * (masked_td_error ** 2)
}
"""What pymarl2's configs for QMIX, VDN and IQL share (hijkzzz/pymarl2 at 8ccac7c): the
parallel runner of 8 envs, Adam, epsilon over 100,000 steps and the halved squared TD error
of its learners; each algorithm's package adds its own (``Mixer.pymarl2``)."""
PRESETS = ("pymarl2",)


def preset_settings(mixer: Mixer):
    """``prepare`` of the Q algorithm with ``mixer``: the settings with their preset filled
    in (a knob the preset sets and the user set too is an error naming it)."""

    def prepare(env_id: str, settings: QSettings) -> QSettings:
        if settings.preset != "pymarl2":
            return settings
        knobs = {**PYMARL2_COMMON, **mixer.pymarl2}
        name = env_id.partition("/")[2].rsplit("-v", 1)[0]
        if env_id.startswith("smac/"):
            knobs.update(mixer.pymarl2_per_map.get(name, {}))
        default = type(settings)()
        changed = [k for k in knobs if getattr(settings, k) != getattr(default, k)]
        if changed:
            raise AlgorithmMismatch(
                f"preset=pymarl2 sets {', '.join(changed)} itself; leave them out or drop preset"
            )
        return dataclasses.replace(settings, **knobs)

    return prepare


def declare_q(env_id: str, settings: QSettings, opts: RunOptions, *, mixer: Mixer):
    """A :class:`QNetwork` per module of ``env_id`` under ``opts.sharing``, and the mixer's
    learner-only module where it has one (QMIX's hypernetworks on the global state)."""
    vec = envs.make_vector(env_id, 1, **opts.env_config)
    try:
        slots = plan_modules(vec.groups, opts.sharing, env_id)
    except ValueError as e:
        raise AlgorithmMismatch(str(e)) from None
    model = dataclasses.asdict(settings.model)
    specs = {}
    for mid, slot in slots.items():
        spec = BatchSpec.for_space(
            slot.observation_space,
            mask_dim=int(slot.action_space.n) if slot.masked else 0,
            num_ids=slot.num_agents if settings.model.agent_id else 0,
        )
        specs[mid] = RLModuleSpec(
            module_class=QNetwork,
            observation_space=spec.space(),
            action_space=slot.action_space,
            model_config={"batch_spec": spec.to_dict(), "model": model, "slot": slot_to_dict(slot)},
        )
    if mixer.module is not None:
        if len(vec.state_space.shape) != 1:
            raise AlgorithmMismatch(
                f"{env_id} gives each agent its own state (shape {vec.state_space.shape}); the "
                "mixer reads one global state: leave the env's per-agent state off "
                "(SMAC: use_state_agent=False)"
            )
        specs[MIXER] = mixer.module(settings, int(vec.state_space.shape[0]), vec.num_agents)
    return MultiRLModuleSpec(rl_module_specs=specs)


def configure_q(env_id: str, settings: QSettings, modules, opts: RunOptions, *, mixer: Mixer):
    """The RLlib config that trains ``modules`` with :class:`policies.q.trainer.QAlgorithm`."""
    from policies.q.trainer import QConfig
    from policies.sampling import VectorEnvRunner

    names = list(modules.rl_module_specs)
    agents = [m for m in names if m != MIXER]
    if mixer.mix is not None and opts.frozen:
        raise AlgorithmMismatch(
            f"a mixer learns the whole team's Q at once; freezing {list(opts.frozen)} is only "
            "possible with iql"
        )
    mapping = {
        agent: mid
        for mid in agents
        for agent in modules.rl_module_specs[mid].model_config["slot"]["agents"]
    }
    learner = {
        **dataclasses.asdict(settings),
        "mixer": mixer,
        "agents": [m for m in agents if m not in opts.frozen],
    }
    return (
        QConfig()
        .environment(env=env_id, env_config=opts.env_config)
        .framework("torch")
        .env_runners(
            env_runner_cls=VectorEnvRunner,
            num_env_runners=opts.num_env_runners,
            num_envs_per_env_runner=settings.batch_size_run,
            num_cpus_per_env_runner=1,
        )
        .learners(
            num_learners=opts.learners,
            num_gpus_per_learner=opts.gpus_per_learner,
            learner_config_dict=learner,
        )
        .rl_module(rl_module_spec=modules)
        .multi_agent(
            policies=list(names),
            policy_mapping_fn=lambda agent_id, *args, **kwargs: mapping[agent_id],
            policies_to_train=[m for m in names if m not in opts.frozen],
        )
        .training(lr=settings.lr, gamma=settings.gamma, grad_clip=None)
        .reporting(metrics_num_episodes_for_smoothing=100)
        .debugging(seed=opts.seed)
    )


def algorithm(name: str, mixer: Mixer, description: str) -> AlgorithmInfo:
    """The ``AlgorithmInfo`` of a Q-learning algorithm with ``mixer``: its package holds its
    mixer and this line, and the registry one line."""
    one_team = mixer.mix is not None
    return AlgorithmInfo(
        name=name,
        description=description,
        settings=QSettings,
        # A mixer adds up one team's values: one group of agents sharing the team reward.
        capabilities=Capabilities(
            action_kinds=frozenset({"discrete"}),
            groups=not one_team,
            needs_state=mixer.module is not None,
        ),
        prepare=preset_settings(mixer),
        declare=lambda env_id, settings, opts: declare_q(env_id, settings, opts, mixer=mixer),
        configure=lambda env_id, settings, modules, opts: configure_q(
            env_id, settings, modules, opts, mixer=mixer
        ),
        metrics=Q_METRICS,
        losses=Q_LOSSES,
        example_env="smac/3m-v0",
    )
