"""System Neural Diversity (SND): how differently the agents of a team act on the same
observations, logged during training as ``snd``, ``snd_tv`` and ``snd_js_bits`` in
``metrics.csv``.

Bettini et al., "System Neural Diversity" (arXiv 2305.02128):
``SND = 2 / (n (n - 1)) * sum_{i<j} 1/|O| * sum_{o in O} d(pi_i(o), pi_j(o))`` over an
observation set ``O``. ``d`` is the Wasserstein-2 distance between diagonal Gaussians
``sqrt(|mu_i - mu_j|^2 + |sigma_i - sigma_j|^2)`` for continuous actions
(proroklab/ControllingBehavioralDiversity ``het_control/snd.py``). For discrete actions it is
what HyperMARL logs (KaleabTessera/HyperMARL@03fea2a: baselines/utils/utils.py,
``calculate_team_diversity``): ``snd`` is ``scipy.spatial.distance.jensenshannon``, the
Jensen-Shannon *distance* (the square root of the divergence, natural log, so in
[0, sqrt(ln 2)]), and ``snd_tv`` the total variation ``0.5 * sum |p - q|``;
``snd_js_bits`` is Arena's earlier measure, the JS divergence in bits (in [0, 1]). Agents are
compared within their group (one observation and action space); a run whose groups hold one
agent each has no SND.

``O``: HyperMARL reads a pre-collected Dispersion dataset; Arena collects, every iteration,
:data:`ROLLOUT_OBSERVATIONS` observations per group from the current policies' own rollouts
(sampled actions, :data:`ROLLOUT_ENVS` envs seeded by the iteration), so ``O`` is what the
team sees now.

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
"""Size of a random-play observation set (:func:`observation_set` without a policy)."""
ROLLOUT_OBSERVATIONS = 1024
"""Observations per group the current policies' rollouts give SND every iteration."""
ROLLOUT_ENVS = 8
"""Envs those rollouts step at once."""


def observation_set(
    env_id: str,
    env_config: dict | None = None,
    size: int = OBSERVATIONS,
    seed: int = 0,
    policy=None,
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """``group -> (observations [size, ...], action masks [size, A] or None)``: what the
    group's agents see along seeded play, the same set for the same seed and policy: the
    actions ``policy`` (a :class:`policies.inference.Policy`) samples, or with no policy
    uniformly random legal ones. A recurrent policy acts from its initial state every step
    (as SND evaluates it)."""
    vec = envs.make_vector(env_id, ROLLOUT_ENVS, seed=seed, **dict(env_config or {}))
    rng = np.random.default_rng(seed)
    seen: dict[str, list] = {g: [] for g in vec.groups}
    step = vec.reset(seed=seed)
    while min(sum(len(o) for o, _ in seen[g]) for g in seen) < size:
        actions = {}
        if policy is not None:
            actions, _ = policy.act_vector(step, explore=True)
        for name, g in vec.groups.items():
            obs = step.obs[name].reshape(-1, *g.observation_space.shape)
            mask = step.action_mask[name].reshape(len(obs), -1) if g.has_action_mask else None
            seen[name].append((obs.copy(), None if mask is None else mask.copy()))
            shape = step.obs[name].shape[:2]
            if policy is not None:
                continue
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


def snd_discrete(logits: torch.Tensor) -> tuple[float, float, float]:
    """SND of categorical policies ``[K, n, A]``, per observation and pair then averaged:
    (scipy's ``jensenshannon`` distance, total variation, JS divergence in bits)."""
    p = torch.softmax(logits.double(), dim=-1)
    i, j = _pairs(len(p))
    a, b = p[i], p[j]
    m = (a + b) / 2

    def kl(x, y):  # natural log; 0 log 0 = 0 (scipy's rel_entr)
        return torch.where(x > 0, x * (torch.log(x) - torch.log(y.clamp_min(1e-300))), 0).sum(-1)

    js = 0.5 * kl(a, m) + 0.5 * kl(b, m)  # nats
    tv = 0.5 * (a - b).abs().sum(-1)
    distance = js.clamp_min(0).sqrt()  # scipy: sqrt((rel_entr(p, m) + rel_entr(q, m)) / 2)
    return float(distance.mean()), float(tv.mean()), float((js / np.log(2)).mean())


def snd_gaussian(inputs: torch.Tensor) -> float:
    """SND of diagonal Gaussian policies ``[K, n, 2A]`` (means, then log std): the mean
    Wasserstein-2 distance."""
    mu, log_std = inputs.double().chunk(2, dim=-1)
    std = log_std.exp()
    i, j = _pairs(len(mu))
    w2 = ((mu[i] - mu[j]).pow(2).sum(-1) + (std[i] - std[j]).pow(2).sum(-1)).sqrt()
    return float(w2.mean())


def system_diversity(modules, slots: dict[str, dict], observations) -> dict[str, float]:
    """``{"snd": ..., "snd_tv": ..., "snd_js_bits": ...}`` averaged over the groups of two or
    more agents (NaN where there are none; the last two NaN for continuous actions)."""
    snd, tv, bits = [], [], []
    for group, agents in group_agents(slots).items():
        if len(agents) < 2 or group not in observations:
            continue
        obs, mask = observations[group]
        out = agent_outputs(modules, agents, obs, mask)
        if hasattr(modules[agents[0][0]].action_space, "n"):
            d, t, b = snd_discrete(out)
            snd.append(d)
            tv.append(t)
            bits.append(b)
        else:
            snd.append(snd_gaussian(out))

    def mean(x):
        return float(np.mean(x)) if x else float("nan")

    return {"snd": mean(snd), "snd_tv": mean(tv), "snd_js_bits": mean(bits)}


class DiversityCallback(RLlibCallback):
    """Adds SND to every training result (``result["arena"]``): the observations from a
    rollout of the current policies (the driver's synced modules), the distances computed on
    the Learner's modules (local or remote)."""

    def on_algorithm_init(self, *, algorithm, **kwargs) -> None:
        specs = algorithm.config.rl_module_spec.rl_module_specs
        self.slots = {mid: s.model_config["slot"] for mid, s in specs.items()}
        self.acting = [mid for mid, s in specs.items() if not s.learner_only]
        groups = group_agents(self.slots)
        # stacked seeds: a module's rows must come in one block per seed (not measured yet)
        stacked = stacked_seeds(algorithm.config.rl_module_spec) > 1
        self.measured = any(len(a) > 1 for a in groups.values()) and not stacked

    def rollout_observations(self, algorithm) -> dict:
        """This iteration's observation set: the current policies' own play."""
        from policies.inference import ModulePolicy, Policy

        cfg = algorithm.config
        policy = Policy({mid: ModulePolicy(algorithm.get_module(mid)) for mid in self.acting})
        seed = (cfg.seed or 0) * 100_003 + algorithm.iteration
        return observation_set(cfg.env, cfg.env_config, ROLLOUT_OBSERVATIONS, seed, policy)

    def on_train_result(self, *, algorithm, result: dict, **kwargs) -> None:
        if not self.measured:
            return
        slots, observations = self.slots, self.rollout_observations(algorithm)

        def measure(learner):
            # unwrapped: several Learners wrap their modules for DDP
            modules = {mid: learner.module[mid].unwrapped() for mid in slots}
            return system_diversity(modules, slots, observations)

        answers = list(algorithm.learner_group.foreach_learner(measure))
        if answers and answers[0].ok:
            result.setdefault("arena", {}).update(answers[0].get())


METRICS = ("snd", "snd_tv", "snd_js_bits")
"""The columns :class:`DiversityCallback` adds to ``metrics.csv``."""
