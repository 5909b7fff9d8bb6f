"""RGB frames of a battle: the map's unpathable ground in dark grey, units as circles by type
and team, hp and shield bars, attack and heal lines, drawn with Pillow from the core's
arrays."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from envs.smac.maps import MAP_SIZE
from envs.smac.units import UNIT_TYPES

SCALE = 12  # pixels per distance unit
# One hue per team, lighter or darker per unit type.
TEAM_RGB = ((60, 120, 230), (220, 70, 60))
TYPE_SHADE = np.linspace(0.75, 1.25, len(UNIT_TYPES))
LETTER = {u.name: u.name[0].upper() for u in UNIT_TYPES}
LETTER.update(marauder="R", medivac="V", spine_crawler="S", zergling="g", colossus="C")


def frame(core, b: int = 0) -> np.ndarray:
    """The ``[H, W, 3]`` uint8 picture of battle ``b`` of ``core`` (a ``BattleBatch``)."""
    size = int(MAP_SIZE * SCALE)
    img = Image.new("RGB", (size, size + 18), (236, 232, 220))
    draw = ImageDraw.Draw(img)

    def px(x, y):  # map y grows north; image rows grow down
        return float(x) * SCALE, (MAP_SIZE - float(y)) * SCALE

    for cx, cy in zip(*np.nonzero(~core._ground), strict=True):  # ground no unit stands on
        x0, y1 = px(cx, cy)
        draw.rectangle([x0, y1 - SCALE, x0 + SCALE - 1, y1 - 1], fill=(92, 88, 80))

    x, y, alive = core.x[b], core.y[b], core.alive[b]
    for i in np.flatnonzero(alive & (core.fired_at[b] >= 0)):
        j = core.fired_at[b, i]
        heal = bool(core.is_medivac[b, i])
        colour = (40, 170, 60) if heal else ((30, 60, 160) if core.team[i] == 0 else (170, 40, 30))
        draw.line([px(x[i], y[i]), px(x[j], y[j])], fill=colour, width=1)
    for i in range(core.n_units):
        cx, cy = px(x[i], y[i])
        r = float(core.radius[b, i]) * SCALE
        unit = UNIT_TYPES[core.types[b, i]]
        if not alive[i]:  # a cross where it died (the core parks the dead off the map)
            cx, cy = px(core.death_pos[b, i].real, core.death_pos[b, i].imag)
            draw.line([cx - 3, cy - 3, cx + 3, cy + 3], fill=(120, 120, 120))
            draw.line([cx - 3, cy + 3, cx + 3, cy - 3], fill=(120, 120, 120))
            continue
        shade = TYPE_SHADE[core.types[b, i]]
        rgb = tuple(int(min(255, c * shade)) for c in TEAM_RGB[core.team[i]])
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=rgb, outline=(20, 20, 20))
        draw.text((cx - 3, cy - 5), LETTER[unit.name], fill=(255, 255, 255))
        w = max(2 * r, 8)
        hp = float(core.hp[b, i] / core.hp_max[b, i])
        draw.rectangle(
            [cx - w / 2, cy - r - 4, cx - w / 2 + w * hp, cy - r - 2], fill=(40, 190, 40)
        )
        if core.sh_max[b, i] > 0:
            sh = float(core.sh[b, i] / core.sh_max[b, i])
            draw.rectangle(
                [cx - w / 2, cy - r - 7, cx - w / 2 + w * sh, cy - r - 5], fill=(60, 200, 230)
            )
    A = core.n_allies
    text = (
        f"{core.spec.name}  step {int(core.t[b])}/{core.spec.limit}  "
        f"allies {int(alive[:A].sum())}/{A}  enemies {int(alive[A:].sum())}/{core.n_enemies}"
    )
    draw.text((4, size + 3), text, fill=(20, 20, 20))
    return np.asarray(img)
