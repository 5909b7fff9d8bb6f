"""CARLA's semantic tags (0.9.14 and later, the set mmWalk's semantic panoramas use): the class
ids written into semantic images, and the palette CARLA's CityScapes converter shows them in."""

from __future__ import annotations

import numpy as np

TAGS = (
    "unlabeled",
    "road",
    "sidewalk",
    "building",
    "wall",
    "fence",
    "pole",
    "traffic_light",
    "traffic_sign",
    "vegetation",
    "terrain",
    "sky",
    "pedestrian",
    "rider",
    "car",
    "truck",
    "bus",
    "train",
    "motorcycle",
    "bicycle",
    "static",
    "dynamic",
    "other",
    "water",
    "road_line",
    "ground",
    "bridge",
    "rail_track",
    "guard_rail",
)
TAG = {name: i for i, name in enumerate(TAGS)}

PALETTE = np.array(
    [
        (0, 0, 0),
        (128, 64, 128),
        (244, 35, 232),
        (70, 70, 70),
        (102, 102, 156),
        (190, 153, 153),
        (153, 153, 153),
        (250, 170, 30),
        (220, 220, 0),
        (107, 142, 35),
        (152, 251, 152),
        (70, 130, 180),
        (220, 20, 60),
        (255, 0, 0),
        (0, 0, 142),
        (0, 0, 70),
        (0, 60, 100),
        (0, 80, 100),
        (0, 0, 230),
        (119, 11, 32),
        (110, 190, 160),
        (170, 120, 50),
        (55, 90, 80),
        (45, 60, 150),
        (157, 234, 50),
        (81, 0, 81),
        (150, 100, 100),
        (230, 150, 140),
        (180, 165, 180),
    ],
    np.uint8,
)


def colorize(semantic: np.ndarray) -> np.ndarray:
    """An 8-bit class-id image ``[H, W]`` as CARLA's colours ``[H, W, 3]`` (for looking at)."""
    return PALETTE[np.minimum(semantic, len(PALETTE) - 1)]
