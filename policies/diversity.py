"""System Neural Diversity (SND): how differently the agents of a team act on the same
observations, logged during training as ``snd`` (and ``snd_tv``) in ``metrics.csv``.

Bettini et al., "System Neural Diversity" (arXiv 2305.02128):
``SND = 2 / (n (n - 1)) * sum_{i<j} 1/|O| * sum_{o in O} d(pi_i(o), pi_j(o))`` over a fixed
observation set ``O``. ``d`` is the Wasserstein-2 distance between diagonal Gaussians
``sqrt(|mu_i - mu_j|^2 + |sigma_i - sigma_j|^2)`` for continuous actions
(proroklab/ControllingBehavioralDiversity ``het_control/snd.py``); for discrete actions the
Jensen-Shannon divergence (base 2, so in [0, 1]), with the total variation as ``snd_tv``, as
HyperMARL measures it on Dispersion. Agents are compared within their group (one observation
and action space); a run whose groups hold one agent each has no SND.

A shared policy without agent ids has SND 0 by construction; independent policies, ids and
hypernetworks can move it up.
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.callbacks.callbacks import RLlibCallback

import envs
from policies.batch import BatchSpec
from policies.modules import stacked_seeds

OBSERVATIONS = 256
"""Size of the fixed observation set, per group."""


def observation_set(
    env_id: str, env_config: dict | None = None, size: int = OBSERVATIONS, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """``group -> (observations [size, ...], action masks [size, A] or None)``: what the
    group's agents see along seeded random (legal) play, the same set every call."""
    vec = envs.make_vector(env_id, 8, seed=seed, **dict(env_config or {}))
    rng = np.random.default_rng(seed)
    seen: dict[str, list] = {g: [] for g in vec.groups}
    step = vec.reset(seed=seed)
    while min(sum(len(o) for o, _ in seen[g]) for g in seen) < size:
        actions = {}
        for name, g in vec.groups.items():
            obs = step.obs[name].reshape(-1, *g.observation_space.shape)
            mask = step.action_mask[name].reshape(len(obs), -1) if g.has_action_mask else None
            seen[name].append((obs.copy(), None if mask is None else mask.copy()))
            shape = step.obs[name].shape[:2]
            if mask is not None:  # a uniformly random legal action per agent
                pick = rng.random(mask.shape) * mask
                actions[name] = pick.argmax(-1).reshape(shape)
            elif hasattr(g.action_space, "n"):
                actions[name] = rng.integers(0, g.action_space.n, shape)
            else:
                low, high = g.action_space.low, g.action_space.high
                actions[name] = rng.uniform(low, high, (*shape, *g.action_space.shape))
        step = vec.step(actions)
    out = {}
    for name, parts in seen.items():
        obs = np.concatenate([o for o, _ in parts])
        pick = np.random.default_rng(seed).choice(len(obs), size, replace=False)
        masks = None if parts[0][1] is None else np.concatenate([m for _, m in parts])[pick]
        out[name] = (obs[pick], masks)
    return out


def group_agents(slots: dict[str, dict]) -> dict[str, list[tuple[str, int]]]:
    """``group -> [(module id, place of the agent in the module), ...]`` in the group's
    agent order, from the modules' ``slot`` configs."""
    members: dict[str, list[tuple[int, str, int]]] = {}
    for mid, slot in slots.items():
        place = 0
        for group, indices in slot["members"]:
            for i in indices:
                members.setdefault(group, []).append((i, mid, place))
                place += 1
    return {g: [(mid, p) for _, mid, p in sorted(m)] for g, m in members.items()}


def agent_outputs(modules, agents: list[tuple[str, int]], obs, mask) -> torch.Tensor:
    """``[K, n, D]``: each agent's action-distribution inputs on the observation rows
    (recurrent modules from their initial state)."""
    outs = []
    with torch.no_grad():
        for mid, place in agents:
            module = modules[mid]
            spec = BatchSpec.from_dict(module.model_config["batch_spec"])
            rows = spec.pack(obs, mask, None, np.full(len(obs), place))
            device = next(module.parameters()).device  # a Learner's may be on a GPU
            state = module.initial_state_rows(len(obs))
            if state is not None:
                state = {k: v.to(device) for k, v in state.items()}
            logits, _ = module.step(
                {k: torch.tensor(v, device=device) for k, v in rows.items()}, state
            )
            outs.append(logits.float().cpu())
    return torch.stack(outs)


def _pairs(K: int) -> tuple[torch.Tensor, torch.Tensor]:
    i, j = torch.triu_indices(K, K, offset=1)
    return i, j


def snd_discrete(logits: torch.Tensor) -> tuple[float, float]:
    """SND of categorical policies ``[K, n, A]``: (Jensen-Shannon in bits, total variation)."""
    p = torch.softmax(logits.double(), dim=-1)
    i, j = _pairs(len(p))
    a, b = p[i], p[j]
    m = (a + b) / 2

    def kl(x, y):
        return torch.where(x > 0, x * (torch.log2(x) - torch.log2(y.clamp_min(1e-300))), 0).sum(-1)

    js = 0.5 * kl(a, m) + 0.5 * kl(b, m)
    tv = 0.5 * (a - b).abs().sum(-1)
    return float(js.mean()), float(tv.mean())


def snd_gaussian(inputs: torch.Tensor) -> float:
    """SND of diagonal Gaussian policies ``[K, n, 2A]`` (means, then log std): the mean
    Wasserstein-2 distance."""
    mu, log_std = inputs.double().chunk(2, dim=-1)
    std = log_std.exp()
    i, j = _pairs(len(mu))
    w2 = ((mu[i] - mu[j]).pow(2).sum(-1) + (std[i] - std[j]).pow(2).sum(-1)).sqrt()
    return float(w2.mean())


def system_diversity(modules, slots: dict[str, dict], observations) -> dict[str, float]:
    """``{"snd": ..., "snd_tv": ...}`` averaged over the groups of two or more agents (NaN
    where there are none; ``snd_tv`` NaN for continuous actions)."""
    snd, tv = [], []
    for group, agents in group_agents(slots).items():
        if len(agents) < 2 or group not in observations:
            continue
        obs, mask = observations[group]
        out = agent_outputs(modules, agents, obs, mask)
        if hasattr(modules[agents[0][0]].action_space, "n"):
            js, t = snd_discrete(out)
            snd.append(js)
            tv.append(t)
        else:
            snd.append(snd_gaussian(out))
    return {
        "snd": float(np.mean(snd)) if snd else float("nan"),
        "snd_tv": float(np.mean(tv)) if tv else float("nan"),
    }


class DiversityCallback(RLlibCallback):
    """Adds SND on a fixed observation set to every training result (``result["arena"]``),
    computed on the Learner's modules (local or remote)."""

    def on_algorithm_init(self, *, algorithm, **kwargs) -> None:
        specs = algorithm.config.rl_module_spec.rl_module_specs
        self.slots = {mid: s.model_config["slot"] for mid, s in specs.items()}
        groups = group_agents(self.slots)
        self.observations = None
        # stacked seeds: a module's rows must come in one block per seed (not measured yet)
        stacked = stacked_seeds(algorithm.config.rl_module_spec) > 1
        if any(len(a) > 1 for a in groups.values()) and not stacked:
            cfg = algorithm.config
            self.observations = observation_set(cfg.env, cfg.env_config)

    def on_train_result(self, *, algorithm, result: dict, **kwargs) -> None:
        if self.observations is None:
            return
        slots, observations = self.slots, self.observations

        def measure(learner):
            # unwrapped: several Learners wrap their modules for DDP
            modules = {mid: learner.module[mid].unwrapped() for mid in slots}
            return system_diversity(modules, slots, observations)

        answers = list(algorithm.learner_group.foreach_learner(measure))
        if answers and answers[0].ok:
            result.setdefault("arena", {}).update(answers[0].get())


METRICS = ("snd", "snd_tv")
"""The columns :class:`DiversityCallback` adds to ``metrics.csv``."""
