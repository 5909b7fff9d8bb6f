"""The unit table: StarCraft II's values at "faster" game speed, one row per type.

SMAC itself (github.com/oxwhirl/smac) takes unit stats from the game, so they are written down
here from public re-implementations of SMAC and the game's data:

- hp, shield, armor, damage and bonus, attacks, cooldown, weapon range, speed and size agree
  with smaclite's unit files (github.com/uoe-agents/smaclite,
  ``smaclite/env/units/smaclite_units/*.json``; radius = size / 2) for every type smaclite
  has (the medivac's "damage" is its heal: 12.6 hp per faster second, SC2's 9 per normal
  second; smaclite's ``HEAL_PER_SECOND`` 9 is that number in the wrong unit), except
  the baneling (smaclite: damage 80, cooldown 1, speed 3.15; here SC2's 16 + 19 vs light,
  speed 3.5, no cooldown since it explodes) and the spine crawler's radius (smaclite 0.5,
  here 1.0). smaclite has no hydralisk: its row is SC2's (hp 90, damage 12, cooldown 0.59,
  range 5, speed 3.15).
- shields agree with SMAC's ``unit_max_shield`` (``smac/env/starcraft2/starcraft2.py``);
  sight and weapon ranges with SMACv2's ``unit_sight_range`` / ``unit_shoot_range``
  (github.com/oxwhirl/smacv2, ``smacv2/env/starcraft2/starcraft2.py``).

The agents' units are the SMAC maps' own ``*_RL`` types (their ``UnitData.xml``): the same as
the game's except Hydralisk_RL's 80 hp and Medivac_RL's speed 2.75 per normal second (3.85
faster), kept as ``agent_hp`` / ``agent_speed``; the enemy's units are the game's.

Everything the simulator needs about a unit type is a column here, so that the core gathers
per-unit arrays with one fancy index (``TABLE.hp[types]``) instead of branching on names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Attribute bits.
LIGHT, ARMORED, BIO, MECH, AIR, STRUCTURE = 1, 2, 4, 8, 16, 32


@dataclass(frozen=True)
class UnitType:
    name: str
    race: str  # "T", "P", "Z"
    hp: float
    shield: float
    armor: float
    damage: float  # per attack; for the medivac: hp healed per "faster" second
    attacks: int  # attacks per swing (zealot and colossus hit twice)
    cooldown: float  # "faster" seconds between swings
    range: float  # weapon (or heal) range, edge to edge
    speed: float  # distance per "faster" second
    radius: float
    attributes: int
    bonus: float = 0.0
    bonus_vs: int = 0
    hits_air: bool = False
    hits_ground: bool = True
    sight: float = 9.0  # SC2 sight, used by SMACv2's per-unit ranges
    # SMAC's state divides a unit's weapon cooldown (game loops) by this per-type constant
    # (``unit_max_cooldown``, 15 for a type it does not list).
    state_cooldown: float = 15.0
    # The SMAC maps' ``*_RL`` unit data (the agents' units) where it differs from the game's.
    agent_hp: float | None = None
    agent_speed: float | None = None


# One row a line.
# fmt: off
UNIT_TYPES: tuple[UnitType, ...] = (
    UnitType("marine", "T", 45, 0, 0, 6, 1, 0.61, 5, 3.15, 0.375, LIGHT | BIO, hits_air=True,
             state_cooldown=15),
    UnitType("marauder", "T", 125, 0, 1, 10, 1, 1.07, 6, 3.15, 0.5625, ARMORED | BIO,
             bonus=10, bonus_vs=ARMORED, sight=10, state_cooldown=25),
    UnitType("medivac", "T", 150, 0, 1, 12.6, 0, 0.0, 4, 3.5, 0.75, ARMORED | MECH | AIR,
             hits_ground=False, sight=11, state_cooldown=200, agent_speed=3.85),
    UnitType("stalker", "P", 80, 80, 1, 13, 1, 1.34, 6, 4.13, 0.625, ARMORED | MECH,
             bonus=5, bonus_vs=ARMORED, hits_air=True, sight=10, state_cooldown=35),
    UnitType("zealot", "P", 100, 50, 1, 8, 2, 0.86, 0.1, 3.15, 0.5, LIGHT | BIO,
             state_cooldown=22),
    UnitType("colossus", "P", 200, 150, 1, 10, 2, 1.07, 7, 3.15, 1.0, ARMORED | MECH,
             bonus=5, bonus_vs=LIGHT, sight=10, state_cooldown=24),
    UnitType("zergling", "Z", 35, 0, 0, 5, 1, 0.497, 0.1, 4.13, 0.375, LIGHT | BIO, sight=8,
             state_cooldown=11),
    UnitType("hydralisk", "Z", 90, 0, 0, 12, 1, 0.59, 5, 3.15, 0.625, LIGHT | BIO,
             hits_air=True, state_cooldown=10, agent_hp=80),
    UnitType("baneling", "Z", 30, 0, 0, 16, 1, 0.0, 0.25, 3.5, 0.375, BIO,
             bonus=19, bonus_vs=LIGHT, sight=8, state_cooldown=1),
    UnitType("spine_crawler", "Z", 300, 0, 2, 25, 1, 1.32, 7, 0.0, 1.0, ARMORED | STRUCTURE,
             bonus=5, bonus_vs=ARMORED, sight=11),
)
# fmt: on
INDEX = {u.name: i for i, u in enumerate(UNIT_TYPES)}
MARINE, MARAUDER, MEDIVAC, STALKER, ZEALOT, COLOSSUS, ZERGLING, HYDRALISK, BANELING, SPINE = range(
    len(UNIT_TYPES)
)

# Mechanics constants. SC2 runs 16 game loops per *normal* game second, i.e. 22.4 per "faster"
# second, the unit of the speeds and cooldowns above (Liquipedia; SMAC's own cooldown
# constants are loops at 22.4/s, starcraft2.py). SMAC's step_mul = 8 loops (0.357 faster s) and
# move_amount = 2 (starcraft2.py). The medivac's energy (200, starting at 50), its heal (9 hp
# per normal second = 12.6 per faster second, 3 hp per energy) and its energy regeneration
# (0.5625 per normal second) from the SMAC maps' unit data; the splash sizes as in smaclite.
FRAMES_PER_SECOND = 22.4  # game loops per faster second
STEP_MUL = 8  # game loops per agent step
MOVE_AMOUNT = 2.0
MIN_DAMAGE = 0.5
MEDIVAC_ENERGY_MAX = 200.0
MEDIVAC_ENERGY_START = 50.0
MEDIVAC_HP_PER_ENERGY = 3.0
ENERGY_REGEN_PER_S = 0.7875  # per faster second (0.5625 per normal second)
# Regeneration per game loop (16 loops per normal second): shields 2/s once a unit has taken no
# damage for 10 s (ShieldRegenRate, ShieldRegenDelay), zerg life 0.2734/s (LifeRegenRate).
SHIELD_REGEN_DELAY = 160
SHIELD_REGEN = 2.0 / 16
ZERG_REGEN = 0.2734 / 16
COLOSSUS_SPLASH_WIDTH = 2.8
BANELING_SPLASH_RADIUS = 2.2


class Table:
    """The unit table as NumPy columns indexed by type id."""

    def __init__(self, types: tuple[UnitType, ...]):
        def col(f, dtype=np.float32):
            return np.array([getattr(u, f) for u in types], dtype=dtype)

        self.hp, self.shield, self.armor = col("hp"), col("shield"), col("armor")
        self.damage, self.attacks = col("damage"), col("attacks")
        self.cooldown, self.range, self.speed = col("cooldown"), col("range"), col("speed")
        self.radius, self.sight = col("radius"), col("sight")
        attrs = col("attributes", np.int64)
        self.air = (attrs & AIR) > 0
        self.is_medivac = np.arange(len(types)) == MEDIVAC
        self.is_baneling = np.arange(len(types)) == BANELING
        self.is_colossus = np.arange(len(types)) == COLOSSUS
        # raw[a, t]: damage of one attack of type a on type t before armor (0: cannot hit).
        bonus_applies = (col("bonus_vs", np.int64)[:, None] & attrs[None, :]) > 0
        raw = col("damage")[:, None] + col("bonus")[:, None] * bonus_applies
        can_hit = np.where(
            self.air[None, :], col("hits_air", bool)[:, None], col("hits_ground", bool)[:, None]
        )
        can_hit &= col("attacks")[:, None] > 0
        self.raw = np.where(can_hit, raw, 0.0).astype(np.float32)
        self.can_hit = can_hit
        self.state_cooldown = col("state_cooldown")
        self.agent_hp = np.array([u.agent_hp or u.hp for u in types], np.float32)
        self.agent_speed = np.array([u.agent_speed or u.speed for u in types], np.float32)
        self.zerg = np.array([u.race == "Z" for u in types])
        # The core counts cooldowns in whole game frames, as SC2 does.
        self.cooldown_frames = np.maximum(np.rint(self.cooldown * FRAMES_PER_SECOND), 1).astype(
            np.int64
        )


TABLE = Table(UNIT_TYPES)


def hit_damage(attacker: str, target: str) -> float:
    """Hp damage of one attack on an unshielded target: max(0.5, damage + bonus - armor)."""
    a, t = INDEX[attacker], INDEX[target]
    return max(MIN_DAMAGE, float(TABLE.raw[a, t]) - float(TABLE.armor[t]))
