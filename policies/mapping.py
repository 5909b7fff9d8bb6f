"""Which module acts for which agent: the agent -> module mapping of a training run.

An env's agents come in groups (``envs.vector.AgentGroup``: one role, one pair of spaces).
The sharing mode says how groups map to modules:

* ``shared``: one module for every agent (all groups must have equal spaces);
* ``per_group``: one module per group (simple_tag: ``adversary`` and ``agent``);
* ``per_agent``: one module per agent, no sharing (independent learners, HyperMARL's
  baseline);
* ``auto``: ``shared`` where the env has one group, else ``per_group``.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from envs.vector import AgentGroup

SHARING = ("auto", "shared", "per_group", "per_agent")
SHARED_MODULE = "shared"


@dataclass(frozen=True)
class ModuleSlot:
    """The agents one module acts for.

    Attributes:
        id: the module id (RLlib's ``ModuleID``).
        members: ``(group, indices of the group's agents)`` pairs, in order; the module's
            agents are these, concatenated.
        agents: the module's agents, in that order (the place of an agent here is its
            ``agent_id`` in the module input).
        env_index: each agent's position in the env's agent order.
        observation_space / action_space / masked: shared by all its agents.
    """

    id: str
    members: tuple[tuple[str, tuple[int, ...]], ...]
    agents: tuple[str, ...]
    env_index: tuple[int, ...]
    observation_space: gym.Space
    action_space: gym.Space
    masked: bool

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    def gather(self, per_group: dict[str, np.ndarray]) -> np.ndarray | None:
        return gather(self.members, per_group)

    def scatter(self, values: np.ndarray, per_group: dict[str, np.ndarray]) -> None:
        scatter(self.members, values, per_group)


Members = tuple[tuple[str, tuple[int, ...]], ...]


def gather(members: Members, per_group: dict[str, np.ndarray]) -> np.ndarray | None:
    """A module's agents' slice ``[B, K, ...]`` of per-group arrays ``group -> [B, N_g, ...]``
    (a ``VectorStep``'s observations or masks); None where there are none."""
    if not per_group:
        return None
    parts = []
    for group, idx in members:
        arr = per_group[group]
        parts.append(arr if len(idx) == arr.shape[1] else arr[:, list(idx)])
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)


def scatter(members: Members, values: np.ndarray, per_group: dict[str, np.ndarray]) -> None:
    """Writes a module's ``[B, K, ...]`` values (actions) into its agents' places of the
    per-group arrays ``group -> [B, N_g, ...]``."""
    k0 = 0
    for group, idx in members:
        per_group[group][:, list(idx)] = values[:, k0 : k0 + len(idx)]
        k0 += len(idx)


def slot_from_dict(module_id: str, d: dict, observation_space, action_space) -> ModuleSlot:
    """A :class:`ModuleSlot` from its ``model_config["slot"]`` dict (:func:`slot_to_dict`)."""
    return ModuleSlot(
        module_id,
        tuple((g, tuple(idx)) for g, idx in d["members"]),
        tuple(d["agents"]),
        tuple(d["env_index"]),
        observation_space,
        action_space,
        bool(d["masked"]),
    )


def slot_to_dict(slot: ModuleSlot) -> dict:
    """What a module's ``model_config["slot"]`` holds of its slot (plain lists)."""
    return {
        "members": [[g, list(idx)] for g, idx in slot.members],
        "agents": list(slot.agents),
        "env_index": list(slot.env_index),
        "masked": slot.masked,
    }


def _slot(module_id: str, parts: list[tuple[AgentGroup, tuple[int, ...]]]) -> ModuleSlot:
    g0 = parts[0][0]
    return ModuleSlot(
        module_id,
        tuple((g.name, idx) for g, idx in parts),
        tuple(g.agents[i] for g, idx in parts for i in idx),
        tuple(g.index[i] for g, idx in parts for i in idx),
        g0.observation_space,
        g0.action_space,
        g0.has_action_mask,
    )


def plan_modules(
    groups: dict[str, AgentGroup], sharing: str, env_id: str = "env"
) -> dict[str, ModuleSlot]:
    """The modules for ``groups`` under ``sharing``; an impossible sharing is a ValueError."""
    if sharing not in SHARING:
        raise ValueError(f"unknown policy sharing {sharing!r}; allowed: {', '.join(SHARING)}")
    gs = list(groups.values())
    if sharing == "auto":
        sharing = "shared" if len(gs) == 1 else "per_group"
    if sharing == "shared":
        kinds = {(repr(g.observation_space), repr(g.action_space), g.has_action_mask) for g in gs}
        if len(kinds) > 1:
            desc = ", ".join(
                f"{g.name} ({g.observation_space.shape} obs, {g.action_space})" for g in gs
            )
            raise ValueError(
                f"--policies shared needs one observation and action space for all agents; "
                f"{env_id} has groups {desc}: use per_group or per_agent"
            )
        return {SHARED_MODULE: _slot(SHARED_MODULE, [(g, tuple(range(g.num_agents))) for g in gs])}
    if sharing == "per_group":
        return {g.name: _slot(g.name, [(g, tuple(range(g.num_agents)))]) for g in gs}
    return {a: _slot(a, [(g, (i,))]) for g in gs for i, a in enumerate(g.agents)}
