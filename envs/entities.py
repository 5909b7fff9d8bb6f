"""Entity views of flat observations: one token per entity (own, enemies, allies, landmarks).

One network then acts with any number of units: the population-invariant encoding of ODIS
(Zhang et al., ICLR 2023; github.com/LAMDA-RL/ODIS ``src/modules/decomposers/
sc2_decomposer.py``: ``decompose_obs``) and BiKT, which embed each token and attend over them.
The tokens are the flat observation's own numbers, cut where the env lays them out:

* SMAC (``smac/*``, ``smacv2/*``): ``[move, enemy x E, ally x (A-1), own, timestep]`` as
  SMAC's ``get_obs_agent``; ``own`` is the move features, the own features and the timestep
  (ODIS's ``own_obs = cat(move_feats, own_feats)``, its own features counting the timestep).
* MPE ``simple_spread`` (mpe2): ``[vel, pos, landmark x L, other x K, comm x K]``; ``own`` is
  velocity and position, a landmark is its position relative to the agent, an ally is its
  relative position and its communication (two blocks, joined per entity).
* ODIS's grid navigation (``gridmpe/cn-v0``): ``[own, other x (N-1), landmark x N]``, each a
  position (ODIS's ``cn_decomposer.py``, whose landmarks are its "enemies" with no attack).

:func:`entity_layout` gives an env's :class:`EntityLayout`; ``split`` and ``join`` are
exact inverses (``tests/envs/test_entities.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Block:
    """``count`` entities of ``width`` features each, side by side from ``start``."""

    start: int
    count: int
    width: int

    @property
    def stop(self) -> int:
        return self.start + self.count * self.width


@dataclass(frozen=True)
class EntityLayout:
    """Where each entity's features sit in a flat observation of length ``dim``.

    Args:
        dim: the flat observation's length.
        own: ``(start, stop)`` pieces of the agent's own token, joined in order.
        groups: entity kind -> its blocks; entity ``i`` of a kind is its ``i``-th slot of
            every block, joined in order (an MPE ally: position, then communication).
    """

    dim: int
    own: tuple[tuple[int, int], ...]
    groups: dict[str, tuple[Block, ...]]

    def __post_init__(self):
        covered = np.zeros(self.dim, int)
        for a, b in self.own:
            covered[a:b] += 1
        for kind, blocks in self.groups.items():
            if len({blk.count for blk in blocks}) > 1:
                raise ValueError(f"{kind}: blocks of different counts {blocks}")
            for blk in blocks:
                covered[blk.start : blk.stop] += 1
        if (covered != 1).any():
            raise ValueError(f"the layout does not cover 0..{self.dim} once: {self}")

    @property
    def own_width(self) -> int:
        return sum(b - a for a, b in self.own)

    def count(self, kind: str) -> int:
        return self.groups[kind][0].count

    def width(self, kind: str) -> int:
        return sum(blk.width for blk in self.groups[kind])

    def split(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """``obs [..., dim]`` -> ``{"own": [..., own_width], kind: [..., count, width]}``."""
        if obs.shape[-1] != self.dim:
            raise ValueError(f"observation of length {obs.shape[-1]}; this layout's is {self.dim}")
        lead = obs.shape[:-1]
        out = {"own": np.concatenate([obs[..., a:b] for a, b in self.own], -1)}
        for kind, blocks in self.groups.items():
            parts = [
                obs[..., blk.start : blk.stop].reshape(*lead, blk.count, blk.width)
                for blk in blocks
            ]
            out[kind] = np.concatenate(parts, -1)
        return out

    def join(self, tokens: dict[str, np.ndarray]) -> np.ndarray:
        """The inverse of :meth:`split`."""
        own = tokens["own"]
        obs = np.zeros((*own.shape[:-1], self.dim), own.dtype)
        at = 0
        for a, b in self.own:
            obs[..., a:b] = own[..., at : at + b - a]
            at += b - a
        for kind, blocks in self.groups.items():
            at = 0
            for blk in blocks:
                piece = tokens[kind][..., at : at + blk.width]
                obs[..., blk.start : blk.stop] = piece.reshape(*piece.shape[:-2], -1)
                at += blk.width
        return obs


def _smac(core) -> EntityLayout:
    A, E = core.n_allies, core.n_enemies
    dim = core.observation_space.shape[0]
    enemy = Block(core.nf_move, E, core.nf_enemy)
    ally = Block(enemy.stop, A - 1, core.nf_ally)
    return EntityLayout(
        dim, ((0, core.nf_move), (ally.stop, dim)), {"enemy": (enemy,), "ally": (ally,)}
    )


def _spread(env_args: dict) -> EntityLayout:
    n = int(env_args.get("N", 3))
    landmarks = env_args.get("num_landmark_neighbors") or n
    others = env_args.get("num_agent_neighbors") or n - 1
    landmark = Block(4, landmarks, 2)
    ally_pos = Block(landmark.stop, others, 2)
    ally_comm = Block(ally_pos.stop, others, 2)  # mpe2's world.dim_c
    return EntityLayout(
        ally_comm.stop, ((0, 4),), {"landmark": (landmark,), "ally": (ally_pos, ally_comm)}
    )


def _grid_spread(env_args: dict) -> EntityLayout:
    from envs.gridmpe.core import GridSpreadOptions

    n = GridSpreadOptions(**env_args).map.n_agents
    ally = Block(2, n - 1, 2)
    landmark = Block(ally.stop, n, 2)
    return EntityLayout(landmark.stop, ((0, 2),), {"ally": (ally,), "landmark": (landmark,)})


def _smac_state(core) -> EntityLayout:
    opt = core.opt
    if opt.obs_instead_of_state or opt.use_state_agent:
        raise ValueError(
            "the state has no unit blocks with obs_instead_of_state or use_state_agent"
        )
    A, E = core.n_allies, core.n_enemies
    ally = Block(0, A, core.nf_state_ally)
    enemy = Block(ally.stop, E, core.nf_state_enemy)
    groups = {"ally": (ally,), "enemy": (enemy,)}
    stop = enemy.stop
    if opt.state_last_action:
        groups["last_action"] = (Block(stop, A, core.n_actions),)
        stop = groups["last_action"][0].stop
    dim = core.state_space.shape[0]
    return EntityLayout(dim, ((stop, dim),), groups)  # own: the timestep, if the state has it


def state_layout(env_id: str, env_args: dict | None = None) -> EntityLayout:
    """The unit blocks of a SMAC/SMACv2 global state, as SMAC's ``get_state`` lays them out
    (ODIS's ``decompose_state``): ``ally [A, nf_al]``, ``enemy [E, nf_en]``, ``last_action
    [A, n_actions]`` (with ``state_last_action``); ``own`` holds the timestep, if any. ODIS's
    grid navigation: every agent's position, then every landmark's, in the enemy slot (ODIS's
    ``cn_decomposer.py``)."""
    if env_id == "gridmpe/cn-v0":
        n = entity_layout(env_id, env_args).count("landmark")
        ally = Block(0, n, 2)
        landmark = Block(ally.stop, n, 2)
        stop = landmark.stop  # own: empty (no timestep)
        return EntityLayout(stop, ((stop, stop),), {"ally": (ally,), "enemy": (landmark,)})
    if not env_id.startswith(("smac/", "smacv2/")):
        raise ValueError(
            f"no state layout for {env_id!r}; envs with one: smac/*, smacv2/*, gridmpe/cn-v0"
        )
    import envs

    return _smac_state(envs.make(env_id, **dict(env_args or {})).core)


FAMILIES = (
    "smac/*",
    "smacv2/*",
    "mpe/simple_spread-v3",
    "mpe/simple_spread_continuous-v3",
    "gridmpe/cn-v0",
)


def entity_layout(env_id: str, env_args: dict | None = None) -> EntityLayout:
    """The :class:`EntityLayout` of ``env_id`` made with ``env_args``; a ValueError names the
    envs that have one."""
    env_args = dict(env_args or {})
    if env_id.startswith(("smac/", "smacv2/")):
        import envs

        return _smac(envs.make(env_id, **env_args).core)
    if env_id in FAMILIES[2:4]:
        return _spread(env_args)
    if env_id == "gridmpe/cn-v0":
        return _grid_spread(env_args)
    raise ValueError(f"no entity layout for {env_id!r}; envs with one: {', '.join(FAMILIES)}")
