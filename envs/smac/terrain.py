"""The ground of each SMAC map: where units may stand, and the way around what they may not.

The grids come from the SMAC map archives themselves (github.com/oxwhirl/smac,
``smac/env/starcraft2/maps/SMAC_Maps/<map>.SC2Map``, member ``t3CellFlags``: one byte per cell,
row 0 = y 0, bit 0x01 = not pathable; read with the ``mpyq`` MPQ reader). Every map is 32x32
and its flags come in 2x2 blocks, so each layout below is drawn at half resolution: one
character per 2x2 block, the first line at the top (y 30-31), ``.`` pathable, ``#`` not.
Where the archive marks low ground outside a plateau as pathable that no unit can reach (the
plateaus of 6h_vs_8z and 2s_vs_1sc), only the reachable part is drawn. ``CLIFFS`` holds each
layout's cliff levels (member ``t3SyncCliffLevel``), the heights of SMAC's
``obs_terrain_height`` here (``height``).

SMAC indexes ``pathing_grid[x, y]`` in game coordinates and masks a move whose cell one unit
ahead is not pathable (``starcraft2.py``, ``can_move``); ``pathable`` here is indexed the
same way. Units walk on it: ground units on the pathable cells, a colossus also across cliffs
between two pathable levels (SC2's colossus steps up and down cliffs), air units anywhere.
Where the ground is not convex (corridor, so_many_baneling, 2c_vs_64zg), units walk around
the obstacles along shortest paths, as SC2's pathfinding does.
"""

from __future__ import annotations

import functools

import numpy as np

SIZE = 32
_clip = np._core.umath.clip  # the ufunc itself, without np.clip's Python wrapper
# Movers: what a unit may walk on.
GROUND, CLIFF_WALKER, AIR = range(3)

# fmt: off
LAYOUTS = {
    # The 13 standard maps (3m ... 1c3s5z): a plateau 32 wide, y 8-24.
    "band": """
        ################
        ################
        ################
        ################
        ................
        ................
        ................
        ................
        ................
        ................
        ................
        ................
        ################
        ################
        ################
        ################""",
    # 3s_vs_3z, 3s_vs_4z, 3s_vs_5z and SMACv2's 32x32_flat.
    "open": "\n".join(["." * 16] * 16),
    # 2m_vs_1z and bane_vs_bane.
    "octagon": """
        ################
        ################
        ################
        #####......#####
        ####........####
        ###..........###
        ###..........###
        ###..........###
        ###..........###
        ###..........###
        ###..........###
        ####........####
        #####......#####
        ################
        ################
        ################""",
    "6h_vs_8z": """
        ################
        ################
        ################
        ################
        ################
        ################
        #####.....######
        ####.......#####
        ####.......#####
        ####.......#####
        ####.......#####
        #####.....######
        ################
        ################
        ################
        ################""",
    "2s_vs_1sc": """
        ################
        ################
        ################
        ################
        ######..########
        #####....#######
        ####......######
        ####......######
        ####......######
        ####......######
        ####......######
        ####......######
        ################
        ################
        ################
        ################""",
    # Two rooms joined corner to corner at the choke (12-13, 12-13).
    "corridor": """
        ################
        ##########.....#
        #########......#
        ########.......#
        #######........#
        ######.........#
        ######.........#
        #######.......##
        #######......###
        ######.#########
        #.....##########
        #.....##########
        #.....##########
        #.....##########
        #.....##########
        ################""",
    "so_many_baneling": """
        ################
        ###########....#
        ##########.....#
        ##########.....#
        ########.......#
        #######......###
        #######......###
        #####.....######
        ####......######
        ####......######
        ##......########
        ##......########
        #.....##########
        #.....##########
        #...############
        ################""",
    # Low ground (y 6-11) and high ground (y 14-19) split by a cliff (y 12-13) that ground
    # units walk around at either end; the colossi start above it, the zerglings below.
    "2c_vs_64zg": """
        ################
        ################
        ################
        ################
        ################
        ################
        ####........####
        #..............#
        ................
        ..############..
        ................
        #..............#
        ##............##
        ################
        ################
        ################""",
}
# fmt: on
CLIFF_REACH = 2  # a colossus crosses unpathable strips up to this many cells wide

# The cliff level of every cell, from the same archives (member ``t3SyncCliffLevel``: a 16-bit
# value per cell, row 0 = y 0, 64 per cliff level, ramps in between; on these maps always a
# multiple of 8). Drawn at full resolution, the first line at the top (y 31), one base-32
# digit per cell = value / 8: ``0`` low ground, ``8`` level 1 (64), ``g`` level 2 (128),
# ``9``/``b``/``d`` (72/88/104) the ramps of 2c_vs_64zg. The grids are those of every map of
# each layout (checked per map when they were read).
# fmt: off
CLIFFS = {
    "band": """
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000""",
    "open": "\n".join(["8" * 32] * 32),
    "octagon": """
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000088888888888888000000000
        00000000888888888888888800000000
        00000008888888888888888880000000
        00000088888888888888888888000000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000888888888888888888888800000
        00000088888888888888888888000000
        00000008888888888888888880000000
        00000000888888888888888800000000
        00000000088888888888888000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000""",
    "6h_vs_8z": """
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000088888888888800000000000
        00000000888888888888880000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000008888888888888888000000000
        00000000888888888888880000000000
        00000000088888888888800000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000""",
    "2s_vs_1sc": """
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000888888000000000000000
        00000000008888888800000000000000
        00000000088888888880000000000000
        00000000888888888888000000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000""",
    "corridor": """
        00000000000000000000000000000000
        00000000000000000008888888888880
        00000000000000000088888888888880
        00000000000000000888888888888880
        00000000000000008888888888888880
        00000000000000088888888888888880
        00000000000000888888888888888880
        00000000000008888888888888888880
        00000000000088888888888888888880
        00000000000888888888888888888880
        00000000000888888888888888888880
        00000000000888888888888888888880
        00000000000888888888888888888880
        00000000000888888888888888888880
        00000000000888888888888888888880
        00000000000088888888888888888800
        00000000000088888888888888888000
        00000000000888888888888888880000
        00000000008888888888888888800000
        08888888888888880000000000000000
        08888888888888800000000000000000
        08888888888888000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888888888000000000000000000
        08888888888888800000000000000000
        08888888888888800000000000000000
        00000000000000000000000000000000""",
    "so_many_baneling": """
        00000000000000000000000000000000
        00000000000000000000088888888880
        00000000000000000000888888888880
        00000000000000000008888888888880
        00000000000000000008888888888880
        00000000000000000008888888888880
        00000000000000000088888888888880
        00000000000000088888888888888880
        00000000000000888888888888888880
        00000000000008888888888888888880
        00000000000008888888888888888880
        00000000000008888888888888880000
        00000000000088888888888888800000
        00000000088888888888888888800000
        00000000888888888888888888800000
        00000008888888888888880000000000
        00000008888888888888800000000000
        00000008888888888888800000000000
        00000088888888888888800000000000
        00088888888888888888800000000000
        00088888888888888888800000000000
        00088888888888888800000000000000
        00888888888888888000000000000000
        08888888888888888000000000000000
        08888888888888888000000000000000
        08888888888888000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888888880000000000000000000
        08888888880000000000000000000000
        08888888800000000000000000000000
        00000000000000000000000000000000""",
    "2c_vs_64zg": """
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        0008888gggggggggggggggggg8888000
        0088888gggggggggggggggggg8888800
        08889bdggggggggggggggggggdb98880
        88889bdggggggggggggggggggdb98888
        88889bdggggggggggggggggggdb98888
        88889bdggggggggggggggggggdb98888
        88889bdggggggggggggggggggdb98888
        88889bdggggggggggggggggggdb98888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        88888888888888888888888888888888
        08888888888888888888888888888880
        00888888888888888888888888888800
        00088888888888888888888888888000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000
        00000000000000000000000000000000""",
}
# fmt: on


@functools.cache
def pathable(layout: str) -> np.ndarray:
    """``[32, 32]`` bool, indexed ``[x, y]``: SMAC's ``pathing_grid`` of the layout."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown terrain layout {layout!r}; known: {', '.join(LAYOUTS)}")
    rows = [line.strip() for line in LAYOUTS[layout].strip().splitlines()]
    half = np.array([[c == "." for c in row] for row in rows])
    assert half.shape == (SIZE // 2, SIZE // 2), (layout, half.shape)
    cells = np.kron(half, np.ones((2, 2), bool)).astype(bool)  # rows: y 31 first
    cells = cells[::-1].T.copy()
    cells.flags.writeable = False
    return cells


@functools.cache
def height(layout: str) -> np.ndarray:
    """``[32, 32]`` float32, indexed ``[x, y]``: the cell's cliff level value / 255 (0 low
    ground, 64/255 one level up, 128/255 two), the form of SMAC's ``terrain_height`` (the game's
    height map / 255) but not its values: the game's height byte also carries the map's base
    height and scale, which the archives' cliff levels do not give."""
    if layout not in CLIFFS:
        raise ValueError(f"unknown terrain layout {layout!r}; known: {', '.join(CLIFFS)}")
    rows = [line.strip() for line in CLIFFS[layout].strip().splitlines()]
    values = np.array([[int(c, 32) * 8 for c in row] for row in rows], np.float32)
    assert values.shape == (SIZE, SIZE), (layout, values.shape)
    out = (values[::-1].T / 255.0).astype(np.float32)
    out.flags.writeable = False
    return out


@functools.cache
def walkable(layout: str) -> np.ndarray:
    """``[3, 32 * 32]`` bool: where a ground unit, a colossus and an air unit may stand, by
    flat cell ``x * 32 + y``."""
    ground = pathable(layout)
    cliff = ground.copy()
    for axis in (0, 1):  # an unpathable strip with pathable ground close on both sides
        before = np.zeros_like(ground)
        after = np.zeros_like(ground)
        for k in range(1, CLIFF_REACH + 1):
            before |= _shift(ground, k, axis)
            after |= _shift(ground, -k, axis)
        cliff |= before & after
    out = np.stack([ground.ravel(), cliff.ravel(), np.ones(SIZE * SIZE, bool)])
    out.flags.writeable = False
    return out


def _shift(grid: np.ndarray, k: int, axis: int) -> np.ndarray:
    """``grid`` moved by ``k`` cells along ``axis`` (what lies ``k`` cells before each cell)."""
    out = np.zeros_like(grid)
    src = [slice(None)] * 2
    dst = [slice(None)] * 2
    if k > 0:
        src[axis], dst[axis] = slice(0, SIZE - k), slice(k, SIZE)
    else:
        src[axis], dst[axis] = slice(-k, SIZE), slice(0, SIZE + k)
    out[tuple(dst)] = grid[tuple(src)]
    return out


def cell_of(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Flat cell index ``x * 32 + y`` of positions (clamped to the map)."""
    ix = _clip(x.astype(np.int64), 0, SIZE - 1)
    iy = _clip(y.astype(np.int64), 0, SIZE - 1)
    return ix * SIZE + iy


def centres() -> np.ndarray:
    """Complex centre ``x + iy`` of every flat cell."""
    k = np.arange(SIZE * SIZE)
    return (k // SIZE + 0.5) + 1j * (k % SIZE + 0.5)


@functools.cache
def waypoints(layout: str, mover: int) -> np.ndarray | None:
    """``[1024, 1024]`` int16: for a unit of ``mover`` in cell c heading for cell d, the cell
    to walk straight at, ``table[d, c]``: the furthest cell of a shortest path from c to d
    that c sees in a straight line over walkable ground. None where every walkable cell sees
    every other (convex ground: walk straight). Unwalkable cells act as their nearest
    walkable cell."""
    ok = walkable(layout)[mover]
    grid = ok.reshape(SIZE, SIZE)
    xs, ys = np.nonzero(grid.any(1))[0], np.nonzero(grid.any(0))[0]
    if grid[xs[0] : xs[-1] + 1, ys[0] : ys[-1] + 1].all():  # a rectangle
        return None
    cells = np.flatnonzero(ok)
    n = len(cells)
    xy = centres()[cells]
    sees = _line_of_sight(ok, xy)
    if sees.all():
        return None
    # Floyd-Warshall over the 8-connected walkable cells, keeping each pair's next hop.
    gap = np.abs(xy[:, None] - xy[None, :])
    dist = np.where(gap < 1.5, gap, np.inf)  # neighbours: 1 or sqrt(2) apart
    nxt = np.broadcast_to(np.arange(n), (n, n)).copy()
    for k in range(n):
        through = dist[:, k, None] + dist[None, k, :]
        better = through < dist
        dist = np.where(better, through, dist)
        nxt = np.where(better, nxt[:, k, None], nxt)
    # String pulling: follow the path from c and keep the last cell c sees.
    src = np.broadcast_to(np.arange(n)[:, None], (n, n))
    dst = np.broadcast_to(np.arange(n)[None, :], (n, n))
    at, best = src.copy(), src.copy()
    while (at != dst).any():
        at = nxt[at, dst]
        best = np.where(sees[src, at], at, best)
    # Back to all 1024 cells: [destination, current], unwalkable cells via their nearest.
    nearest = np.abs(centres()[:, None] - xy[None, :]).argmin(1)
    table = cells[best.T[nearest][:, nearest]].astype(np.int16)
    table.flags.writeable = False
    return table


def _line_of_sight(ok: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """``[n, n]``: whether the straight segment between two cell centres stays on ``ok``."""
    n = len(xy)
    t = np.linspace(0.0, 1.0, 4 * SIZE + 1)
    out = np.empty((n, n), bool)
    for lo in range(0, n, 32):  # in row chunks, to bound memory
        a = xy[lo : lo + 32, None, None]
        p = a + (xy[None, :, None] - a) * t
        out[lo : lo + 32] = ok[cell_of(p.real, p.imag)].all(-1)
    return out
