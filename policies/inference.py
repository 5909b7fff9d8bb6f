"""A trained policy without its Algorithm: the run's RLModules rebuilt from the algorithm's
module specs and loaded with the checkpoint's plain weights, acting on the observations of a
PettingZoo env. ``arena eval`` plays episodes with it; the policy server uses the same pieces.

Nothing here unpickles: RLlib's checkpoint files are cloudpickles that run code when loaded,
so the weights are read from ``weights/<module>.pt`` (a state dict of tensors) with
``torch.load(weights_only=True)``, which only accepts tensors and plain containers.

Each module's ``model_config`` says which agents it acts for and what it reads (its
:class:`policies.batch.BatchSpec`), so nothing here depends on the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule

from policies.batch import BatchSpec
from policies.mapping import gather, scatter
from policies.modules import FLOAT_MIN, seed_state_dict

WEIGHTS_DIR = "weights"


class WeightsError(ValueError):
    """Module weights that are missing, damaged or do not fit the run's modules."""


def weights_file(module_id: str) -> str:
    """The file of a module's weights inside a checkpoint's ``weights/``."""
    if not module_id or "/" in module_id or module_id.startswith("."):
        raise WeightsError(f"module id {module_id!r} cannot name a file")
    return f"{module_id}.pt"


def save_weights(weights: dict[str, dict], weights_dir: str | Path) -> dict[str, dict]:
    """Writes ``module -> state dict`` as ``weights_dir/<module>.pt``; returns each file's
    size and sha256 (what ``arena.json`` records to verify the checkpoint later)."""
    import hashlib

    weights_dir = Path(weights_dir)
    weights_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for mid, state in weights.items():
        path = weights_dir / weights_file(mid)
        torch.save({k: torch.as_tensor(v).detach().cpu() for k, v in state.items()}, path)
        data = path.read_bytes()
        files[f"{WEIGHTS_DIR}/{path.name}"] = {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    return files


def gumbel_max(logp: torch.Tensor) -> torch.Tensor:
    """One draw per row from the categorical of log-probabilities ``logp`` ``[N, A]``: Gumbel-max
    draws exactly from it without torch.multinomial's per-call overhead. torch.rand can return
    exactly 0, whose Gumbel noise is -inf: it would sink a legal action below the masked ones (a
    dead SMAC agent then "chose" stop, about once in 10^7 draws), so the uniforms start at the
    tiniest float."""
    u = torch.rand_like(logp).clamp_(min=torch.finfo(logp.dtype).tiny)
    return (logp - torch.log(-torch.log(u))).argmax(dim=-1)


@dataclass
class Acted:
    """What :func:`act` returns for N rows.

    Attributes:
        actions: ``[N]`` (discrete) or ``[N, A]``.
        logp: ``[N]`` log-probability of each action under the sampling distribution (0 where
            the module explores epsilon-greedily).
        outputs: the module's outputs ``[N, ...]``: distribution inputs or Q-values.
        state: the module's next recurrent state (None for a feed-forward module).
    """

    actions: np.ndarray
    logp: np.ndarray
    outputs: np.ndarray
    state: dict | None


def choose(
    module, outputs: torch.Tensor, explore, *, epsilon: float = 0.0, uniform: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Actions (and their log-probabilities) from a module's ``outputs``, as the module's
    class explores (its ``EXPLORATION``): ``sample`` from the distribution its outputs
    parameterise (greedy: the mode), or ``epsilon_greedy`` over Q-values (a uniformly random
    legal action with probability ``epsilon``, else the best). ``explore`` is a bool or one
    bool per row; ``uniform`` draws every action uniformly among the legal ones."""
    rows = None if isinstance(explore, bool) else torch.as_tensor(np.asarray(explore, bool))
    if not isinstance(module.action_space, gym.spaces.Discrete):
        dist = module.get_exploration_action_dist_cls().from_logits(outputs)
        greedy = dist.to_deterministic().sample()
        if rows is None:
            actions = dist.sample() if explore else greedy
        else:
            actions = torch.where(rows[:, None], dist.sample(), greedy)
        return actions, dist.logp(actions)
    legal = outputs > FLOAT_MIN  # masked actions' outputs are exactly FLOAT_MIN
    if uniform:
        outputs = torch.where(legal, 0.0, outputs)
    greedy = outputs.argmax(dim=-1)
    if getattr(module, "EXPLORATION", "sample") == "epsilon_greedy" and not uniform:
        pick = torch.rand(len(outputs)) < epsilon
        pick = pick if rows is None else pick & rows
        if (rows is None and not explore) or not bool(pick.any()):
            return greedy, torch.zeros(len(outputs))
        random = gumbel_max(torch.where(legal, 0.0, FLOAT_MIN))
        return torch.where(pick, random, greedy), torch.zeros(len(outputs))
    logp_all = torch.log_softmax(outputs, dim=-1)
    if rows is None:
        actions = gumbel_max(logp_all) if explore else greedy
    else:
        actions = torch.where(rows, gumbel_max(logp_all), greedy)
    return actions, logp_all.gather(-1, actions[:, None])[:, 0]


def act(
    module,
    inputs: dict[str, torch.Tensor],
    state: dict | None = None,
    explore=False,
    *,
    epsilon: float = 0.0,
    uniform: bool = False,
) -> Acted:
    """The one way any module acts for a batch of rows: its forward step on ``inputs`` (a
    ``BatchSpec`` dict of tensors) from recurrent ``state``, then :func:`choose`. A module whose
    state holds ``last_action`` reads its agents' previous actions (PyMARL's agents do): the
    chosen ones, one-hot, go there for the next step."""
    with torch.no_grad():
        outputs, state = module.step(inputs, state)
        actions, logp = choose(module, outputs, explore, epsilon=epsilon, uniform=uniform)
        if state is not None and "last_action" in state:
            last = torch.nn.functional.one_hot(actions, outputs.shape[-1]).to(torch.float32)
            state = {**state, "last_action": last}
    return Acted(actions.numpy(), logp.numpy(), outputs.numpy(), state)


TRAINED_EPSILON = 0.05
"""How a trained epsilon-greedy policy explores when asked to (PyMARL's final epsilon)."""


class ModulePolicy:
    """Greedy or exploring actions of one restored module.

    Args:
        module: the restored RLModule (``policies.modules.ActorCritic``,
            ``policies.q.module.QNetwork``, ...).
    """

    def __init__(self, module: RLModule):
        self.module = module.eval() if hasattr(module, "eval") else module
        cfg = module.model_config
        self.spec = BatchSpec.from_dict(cfg["batch_spec"])
        self.agents: list[str] = list(cfg["slot"]["agents"])
        self.members = tuple((g, tuple(idx)) for g, idx in cfg["slot"].get("members", ()))
        self.env_index = list(cfg["slot"].get("env_index", ()))
        self.action_space = module.action_space
        self.discrete = isinstance(self.action_space, gym.spaces.Discrete)
        self.recurrent = bool(module.get_initial_state())

    def initial_state(self, rows: int) -> dict | None:
        return self.module.initial_state_rows(rows)

    def act_rows(
        self,
        batch: dict[str, np.ndarray],
        explore=False,
        state=None,
        *,
        epsilon: float = TRAINED_EPSILON,
    ) -> tuple[np.ndarray, dict | None]:
        """Actions for packed rows: exploring where ``explore`` (a bool, or one bool per row, so
        a batch mixing both modes still takes one forward pass), else greedy; and the next
        hidden state (recurrent modules: pass ``state``, from :meth:`initial_state` at an
        episode's start)."""
        if self.recurrent and state is None:
            state = self.initial_state(len(next(iter(batch.values()))))
        inputs = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()}
        acted = act(self.module, inputs, state, explore, epsilon=epsilon)
        return acted.actions, acted.state

    def act(
        self, obs, mask=None, agent_index=None, explore=False, state=None
    ) -> tuple[np.ndarray, dict | None]:
        """Actions for observation rows ``[n, *obs_shape]`` (with their masks ``[n, A]`` where
        the module masks actions, and each row's place among the module's agents)."""
        batch = self.spec.pack(obs, mask, None, agent_index)
        return self.act_rows(batch, explore, state)

    def act_group(
        self, obs: np.ndarray, mask=None, explore=False, state=None
    ) -> tuple[np.ndarray, dict | None]:
        """Actions ``[B, K, ...]`` of a team of K agents in B envs (``obs [B, K, ...]``,
        ``mask [B, K, A]``), the k-th agent of each env in the module's k-th place."""
        B, K = obs.shape[:2]
        flat_mask = None if mask is None else mask.reshape(B * K, -1)
        actions, state = self.act(
            obs.reshape(B * K, *obs.shape[2:]), flat_mask, np.tile(np.arange(K), B), explore, state
        )
        return actions.reshape(B, K, *actions.shape[1:]), state


STACKED_SEED = "stacked_seed"
"""``model_config`` key of one seed's plain module of a stacked run: ``[index, seeds]``
(``training.evaluation.module_specs``)."""


def module_from_weights(spec, path: Path):
    """The module of ``spec`` with the plain weights file ``path`` (nothing is unpickled); a
    damaged or foreign file is a :class:`WeightsError` naming it. One seed of a stacked run
    gets its slice of the stacked weights."""
    config = spec.model_config if isinstance(spec.model_config, dict) else {}
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if STACKED_SEED in config:
            state = seed_state_dict(state, *config[STACKED_SEED])
        module = spec.build()
        module.load_state_dict(state)
    except Exception as e:  # name the file, never a traceback
        raise WeightsError(
            f"{path}: cannot load module weights ({type(e).__name__}: {str(e)[:200]})"
        ) from None
    return module


class Policy:
    """The run's modules acting together for any subset of an env's agents.

    Args:
        modules: module id -> :class:`ModulePolicy`.
    """

    def __init__(self, modules: dict[str, ModulePolicy]):
        self.modules = modules
        self.module_of = {a: mid for mid, m in modules.items() for a in m.agents}
        self.place = {a: m.agents.index(a) for m in modules.values() for a in m.agents}
        self.recurrent = any(m.recurrent for m in modules.values())
        self._hidden: dict[str, dict] = {}

    @classmethod
    def from_weights(cls, specs, weights_dir: str | Path) -> Policy:
        """The acting modules of ``specs`` (a ``MultiRLModuleSpec``) with the weights in
        ``weights_dir`` (``<module>.pt`` each); a missing or damaged file is a
        :class:`WeightsError` naming it."""
        weights_dir = Path(weights_dir)
        modules = {}
        for mid, spec in specs.rl_module_specs.items():
            if spec.learner_only:  # trains the others, never acts (QMIX's mixer)
                continue
            path = weights_dir / weights_file(mid)
            if not path.is_file():
                raise WeightsError(
                    f"{weights_dir.parent}: no weights for module {mid!r} ({path} is missing; "
                    "checkpoints from before Arena's training core v2 hold only RLlib's pickles, "
                    "which eval and serve do not load)"
                )
            modules[mid] = ModulePolicy(module_from_weights(spec, path))
        return cls(modules)

    @property
    def agents(self) -> list[str]:
        return list(self.module_of)

    def reset(self) -> None:
        """Forgets recurrent hidden states (call at the start of each episode)."""
        self._hidden = {}

    def pack(self, mid: str, obs: dict[str, Any], state: np.ndarray | None) -> dict:
        """Module ``mid``'s input rows for the agents of ``obs`` (agent -> observation, or
        ``{"observations", "action_mask"}`` where the env masks actions)."""
        m = self.modules[mid]
        spec = m.spec
        agents = list(obs)
        if state is not None and np.ndim(state) == 2:  # a per-agent state [N, S]: each its own
            where = dict(zip(m.agents, m.env_index, strict=True))
            state = np.asarray(state)[[where[a] for a in agents]]
        masked = isinstance(obs[agents[0]], dict)
        x = np.stack([obs[a]["observations"] if masked else obs[a] for a in agents])
        mask = np.stack([obs[a]["action_mask"] for a in agents]) if masked else None
        return spec.pack(x, mask, state, [self.place[a] for a in agents])

    def act_vector(
        self, step, explore=False, hidden: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict]:
        """Actions ``group -> [B, N_g, ...]`` of every agent of B envs (``step``: an
        ``envs.vector.VectorStep``), each module acting for its agents in one forward pass;
        and the modules' next recurrent states (``hidden``: module -> state, {} at the start).
        """
        hidden, actions = dict(hidden or {}), {}
        for mid, m in self.modules.items():
            obs = gather(m.members, step.obs)
            B, K = obs.shape[:2]
            rows = m.spec.buffers(B * K)
            state = step.state  # a per-agent state [B, N, S]: this module's agents' rows
            state = state[:, m.env_index] if state.ndim == 3 else state
            m.spec.write(rows, obs, gather(m.members, step.action_mask), state)
            acts, hidden[mid] = m.act_rows(rows, explore, hidden.get(mid))
            acts = acts.reshape(B, K, *acts.shape[1:])
            for g, _ in m.members:
                if g not in actions:
                    n = step.obs[g].shape[1]
                    actions[g] = np.zeros((B, n, *acts.shape[2:]), acts.dtype)
            scatter(m.members, acts, actions)
        return actions, hidden

    def act(self, obs: dict[str, Any], state=None, explore: bool = False) -> dict[str, Any]:
        """Actions for the agents in ``obs`` (each by its own module)."""
        by_module: dict[str, dict[str, Any]] = {}
        for agent, o in obs.items():
            if agent not in self.module_of:
                raise ValueError(f"no module acts for agent {agent!r}; agents: {self.agents}")
            by_module.setdefault(self.module_of[agent], {})[agent] = o
        out = {}
        for mid, part in by_module.items():
            m = self.modules[mid]
            h = None
            if m.recurrent:
                init = m.initial_state(1)
                rows = [self._hidden.get(a, init) for a in part]
                h = {k: torch.cat([r[k] for r in rows]) for k in init}
            actions, h = m.act_rows(self.pack(mid, part, state), explore, h)
            for i, agent in enumerate(part):
                out[agent] = int(actions[i]) if m.discrete else actions[i]
                if h is not None:
                    self._hidden[agent] = {k: v[i : i + 1] for k, v in h.items()}
        return out


def test_episodes(policy: Policy, vec, explore=False) -> dict[str, np.ndarray]:
    """One episode in each of the B envs of ``vec`` (an ``envs.vector.VectorEnv``, freshly
    reset), every agent acting by ``policy`` (greedily unless ``explore``), the envs stepped as
    one batch. Per env: its ``return`` (every agent's rewards summed, RLlib's episode return),
    its ``team_return`` (the mean over its agents: SMAC's team reward, which every agent
    receives), its ``length`` and, where the env reports it, whether the battle was ``won``
    (else None)."""
    step = vec.reset()
    B = vec.num_envs
    over, won = np.zeros(B, bool), np.zeros(B, bool)
    returns, lengths = np.zeros(B), np.zeros(B, int)
    reports_wins, hidden = False, {}
    while not over.all():
        actions, hidden = policy.act_vector(step, explore, hidden)
        step = vec.step(actions)
        live = ~over
        returns += np.where(live, step.rewards.sum(axis=1), 0.0)
        lengths += live
        ended = (step.terminated | step.truncated) & live
        if step.info is not None and "battle_won" in step.info:
            reports_wins = True
            won |= ended & step.info["battle_won"].astype(bool)
        over |= ended
    return {
        "return": returns,
        "team_return": returns / vec.num_agents,
        "length": lengths,
        "won": won if reports_wins else None,
    }


__all__ = ["ModulePolicy", "Policy", "act", "test_episodes"]
