"""Panoramas of a walking scene from MuJoCo's offscreen renderer, made as mmWalk made them:
per view, square 90-degree cube faces (walker and dog the four side faces, their up and down
left black; the drone all six) stitched into an equirectangular panorama (1600 x 900 by
default: longitude -180..180 degrees left to right, the front face in the middle, latitude
90..-90 top to bottom), RGB bilinear, semantic and depth nearest (mmWalk's py360convert
interpolated depth bilinearly, which averages a pole's edge with the sky behind it).

Encodings (:func:`encode`, :func:`decode`): RGB as it is; semantic 8-bit CARLA class ids;
depth 16-bit metres x 256, planar per face as CARLA's depth camera reports it (the sky and
anything past 255.99 m is clipped to 65535, where mmWalk's cast wrapped around).
"""

from __future__ import annotations

import os

import numpy as np

from envs.files import replacing
from envs.mmwalk.scene import FACE_AXES, FACES, Scene
from envs.mmwalk.tags import TAG
from envs.registry import EnvError

os.environ.setdefault("MUJOCO_GL", "egl")

PANORAMA = (1600, 900)  # width, height (mmWalk's)
FACE = 400
MODALITIES = ("rgb", "depth", "semantic")
VIEW_FACES = {"walker": FACES[:4], "dog": FACES[:4], "drone": FACES}
VIEW_OFFSET = {"walker": (0.0, 0.0, 1.5), "dog": (0.8, 0.0, 0.1), "drone": (0.0, 0.0, 3.0)}
"""Each view's camera relative to the walker (x forward, z up), metres: mmWalk's
``capture.py`` attaches its cameras at these offsets to the CARLA walker actor
(KediYing/mmWalk@6976730 Data_Capture_And_QAGeneration/capture.py:196-206, 225)."""
ACTOR_ROOT = 0.9
"""Where that actor's root sits above its feet: a CARLA walker's root is its capsule's
centre, and CARLA's navigation takes a walker as 1.8 m tall and moves the pivot from the
centre to the feet by half that (carla-simulator/carla
LibCarla/source/carla/nav/Navigation.cpp: ``AGENT_HEIGHT = 1.8f``, ``AddWalker``)."""
CAMERA_ORIGINS = ("actor", "ground")
"""``actor``: the offsets from the actor's root, rigid on the walker, as mmWalk's cameras sat
(walker 2.4 m, dog 1.0 m, drone 3.9 m above the feet). ``ground``: the offsets read as heights
above the surface under each camera (Arena before 2026-12-07; walker 1.5 m, dog 0.1 m)."""

DEPTH_SCALE = 256.0
SKY = -1
STATIC_GROUP = np.array([1, 0, 0, 0, 0, 0], np.uint8)  # movers' geoms are group 1


def check_camera_origin(origin: str, name: str = "camera_origin") -> None:
    """Refuses an origin not in :data:`CAMERA_ORIGINS` (``name``: how the caller spells it)."""
    if origin not in CAMERA_ORIGINS:
        raise EnvError(f"{name} {origin!r}: choose from {', '.join(CAMERA_ORIGINS)}")


class StitchTable:
    """Where each panorama pixel of a ``width x height`` panorama reads from ``face``-pixel
    cube faces: four (face, row, column) neighbours and their bilinear weights."""

    def __init__(self, width: int, height: int, face: int, faces: tuple[str, ...]):
        lon = (np.arange(width) + 0.5) / width * 2 * np.pi - np.pi
        lat = np.pi / 2 - (np.arange(height) + 0.5) / height * np.pi
        lon, lat = np.meshgrid(lon, lat)
        d = np.stack([np.cos(lat) * np.cos(lon), -np.cos(lat) * np.sin(lon), np.sin(lat)], -1)
        axes = np.array([[*FACE_AXES[f]] for f in FACES], float)  # [6, 2, 3]: right, up
        forward = np.cross(axes[:, 1], axes[:, 0])  # MuJoCo cameras look along -(right x up)
        along = d @ forward.T  # [H, W, 6]
        which = along.argmax(-1)
        a = np.take_along_axis(along, which[..., None], -1)[..., 0]
        u = np.einsum("hwk,hwk->hw", d, axes[which, 0]) / a
        v = np.einsum("hwk,hwk->hw", d, axes[which, 1]) / a
        col = np.clip((u + 1) / 2 * face - 0.5, 0, face - 1)
        row = np.clip((1 - v) / 2 * face - 0.5, 0, face - 1)
        c0, r0 = np.floor(col).astype(int), np.floor(row).astype(int)
        c1, r1 = np.minimum(c0 + 1, face - 1), np.minimum(r0 + 1, face - 1)
        fc, fr = col - c0, row - r0
        used = np.array([f in faces for f in FACES])
        self.shown = used[which].ravel()  # pixels of a face the view renders
        slot = np.cumsum(used) - 1  # a face's index among the rendered ones
        base = slot[which] * face * face
        self.index = np.stack(
            [
                base + r0 * face + c0,
                base + r0 * face + c1,
                base + r1 * face + c0,
                base + r1 * face + c1,
            ],
            -1,
        ).reshape(-1, 4)
        self.weight = (
            np.stack([(1 - fr) * (1 - fc), (1 - fr) * fc, fr * (1 - fc), fr * fc], -1)
            .reshape(-1, 4)
            .astype(np.float32)
        )
        self.nearest = self.index[np.arange(len(self.index)), self.weight.argmax(-1)]
        self.shape = (height, width)

    def bilinear(self, faces: np.ndarray) -> np.ndarray:
        """Faces ``[F, S, S, C]`` -> panorama ``[H, W, C]`` (float32)."""
        flat = faces.reshape(-1, faces.shape[-1])
        out = np.zeros((len(self.index), flat.shape[-1]), np.float32)
        for k in range(4):  # four gathers: half the time of one einsum over [N, 4, C]
            out += flat[self.index[:, k]] * self.weight[:, k : k + 1]
        out[~self.shown] = 0
        return out.reshape(*self.shape, -1)

    def pick(self, faces: np.ndarray, fill) -> np.ndarray:
        """Faces ``[F, S, S]`` -> panorama ``[H, W]`` of the nearest face pixels."""
        out = faces.reshape(-1)[self.nearest]
        out = np.where(self.shown, out, fill)
        return out.reshape(self.shape)


class Panoramas:
    """Renders the views of one scene. ``size`` the panorama (width, height), ``face`` the
    cube face side in pixels."""

    def __init__(
        self,
        scene: Scene,
        size: tuple[int, int] = PANORAMA,
        face: int = FACE,
        camera_origin: str = "actor",
    ):
        import mujoco

        check_camera_origin(camera_origin)
        self.scene, self.size, self.face = scene, tuple(size), face
        self.camera_origin = camera_origin
        self.model = mujoco.MjModel.from_xml_string(scene.mjcf(face))
        self.data = mujoco.MjData(self.model)
        mujoco.mj_kinematics(self.model, self.data)  # geoms in place for ground()'s rays
        try:
            self.renderer = mujoco.Renderer(self.model, face, face)
        except Exception as e:  # noqa: BLE001 - MuJoCo raises its own error types per backend
            raise RuntimeError(
                f"MuJoCo cannot render here ({e}); MUJOCO_GL is "
                f"{os.environ.get('MUJOCO_GL')!r}: set MUJOCO_GL=egl (no display) or osmesa"
            ) from None
        self.fog = scene.weather in ("foggy", "rainy")
        self.tag, self.owner = geom_tables(self.model, scene)
        self.movers = [self.model.body(m.name).mocapid[0] for m in scene.movers]
        self.rigs = {v: self.model.body(f"rig_{v}").mocapid[0] for v in VIEW_FACES}
        self._tables: dict[str, StitchTable] = {}

    def table(self, view: str) -> StitchTable:
        if view not in self._tables:  # built on first use: the env renders single faces only
            self._tables[view] = StitchTable(*self.size, self.face, VIEW_FACES[view])
        return self._tables[view]

    def close(self) -> None:
        self.renderer.close()

    def place(self, xy, yaw: float, movers: np.ndarray | None = None) -> None:
        """Puts the walker at ``xy`` facing ``yaw`` (radians, 0 = +x) and the movers at
        ``movers [M, 3]`` (x, y, yaw)."""
        import mujoco

        c, s = np.cos(yaw), np.sin(yaw)
        ground = self.ground(xy)
        quat = np.array([np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)])
        for view, mocap in self.rigs.items():
            dx, dy, dz = VIEW_OFFSET[view]
            x, y = xy[0] + c * dx - s * dy, xy[1] + s * dx + c * dy
            if self.camera_origin == "actor":  # rigid on the walker's root, as CARLA attaches
                base = ground + ACTOR_ROOT
            else:
                base = ground if view != "dog" else self.ground((x, y))
            self.data.mocap_pos[mocap] = [x, y, base + dz]
            self.data.mocap_quat[mocap] = quat
        if movers is not None:
            for mocap, (x, y, a) in zip(self.movers, movers, strict=True):
                self.data.mocap_pos[mocap] = [x, y, 0.0]
                self.data.mocap_quat[mocap] = [np.cos(a / 2), 0, 0, np.sin(a / 2)]
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)

    def ground(self, xy) -> float:
        """The height of the surface under ``xy`` (a ray down from 1 m, below any overhang:
        the walker stands on sidewalks, curbs and slabs)."""
        import mujoco

        geom = np.array([-1], np.int32)
        dist = mujoco.mj_ray(
            self.model,
            self.data,
            np.array([xy[0], xy[1], 1.0]),
            np.array([0.0, 0.0, -1.0]),
            STATIC_GROUP,
            1,
            -1,
            geom,
        )
        return 0.0 if dist < 0 else max(1.0 - dist, 0.0)

    def faces(self, view: str, modality: str, which: tuple[str, ...] | None = None) -> np.ndarray:
        """The rendered faces of ``view`` (``which``: a subset, e.g. ``("front",)``):
        ``[F, S, S, 3]`` uint8 RGB, ``[F, S, S]`` float depth (metres) or int geom ids (-1:
        sky)."""
        import mujoco

        r = self.renderer
        if modality == "depth":
            r.enable_depth_rendering()
        elif modality == "semantic":
            r.enable_segmentation_rendering()
        out = []
        for face in which or VIEW_FACES[view]:
            r.update_scene(self.data, camera=f"{view}_{face}")
            r.scene.flags[mujoco.mjtRndFlag.mjRND_FOG] = self.fog and modality == "rgb"
            img = r.render()
            out.append(img[..., 0].copy() if modality == "semantic" else img.copy())
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        return np.stack(out)

    def view(self, view: str, modalities=MODALITIES) -> dict[str, np.ndarray]:
        """Panoramas of ``view``: ``rgb [H, W, 3]`` uint8, ``depth [H, W]`` float metres,
        ``semantic [H, W]`` uint8 class ids and ``geom [H, W]`` int geom ids (-1: sky)."""
        table = self.table(view)
        out = {}
        for m in modalities:
            faces = self.faces(view, m)
            if m == "rgb":
                img = table.bilinear(faces)
                out["rgb"] = np.clip(img + 0.5, 0, 255).astype(np.uint8)
            elif m == "depth":
                out["depth"] = table.pick(faces, 0.0)
            else:
                geom = table.pick(faces, SKY)
                out["geom"] = geom
                # mmWalk's capture leaves the faces a view does not render (walker and dog: up
                # and down) zero: class 0, unlabeled, not sky
                shown = table.shown.reshape(table.shape)
                out["semantic"] = np.where(shown, self.tag[geom], np.uint8(TAG["unlabeled"]))
        return out


def geom_tables(model, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """Per geom id: its CARLA class id and the index of its object in ``scene.things +
    scene.movers`` (-1 for none); both indexed with -1 too (the sky: class 11, no object)."""
    things = {t.name: (i, t) for i, t in enumerate(scene.things)}
    movers = {m.name: (len(things) + i, m) for i, m in enumerate(scene.movers)}
    tag = np.zeros(model.ngeom + 1, np.uint8)
    owner = np.full(model.ngeom + 1, -1, int)
    for g in range(model.ngeom):
        name = model.geom(g).name
        base, _, part = name.partition("/")
        if base in things:
            i, t = things[base]
            tag[g], owner[g] = TAG[t.parts[int(part)].tag], i
        elif base in movers:
            i, m = movers[base]
            tag[g], owner[g] = TAG[m.parts[int(part)].tag], i
        elif name == "terrain":
            tag[g] = TAG["terrain"]
    tag[-1] = TAG["sky"]
    return tag, owner


def encode(modality: str, image: np.ndarray) -> np.ndarray:
    """A panorama as mmWalk stores it: RGB uint8, semantic uint8 ids, depth uint16 metres x
    256 (clipped to 65535)."""
    if modality == "depth":
        return np.clip(np.round(image * DEPTH_SCALE), 0, 65535).astype(np.uint16)
    if modality == "semantic":
        return image.astype(np.uint8)
    return image.astype(np.uint8)


def decode(modality: str, stored: np.ndarray) -> np.ndarray:
    """Inverse of :func:`encode`: depth back to metres (float32)."""
    if modality == "depth":
        return stored.astype(np.float32) / DEPTH_SCALE
    return stored


def write_png(path, image: np.ndarray) -> None:
    """Writes a PNG (RGB 8-bit, 8-bit or 16-bit grey) at ``path`` through a temporary name,
    so a reader never sees half a file."""
    from PIL import Image

    im = Image.fromarray(image)  # uint16 [H, W] -> 16-bit grey ("I;16")
    with replacing(path) as tmp:
        im.save(tmp, format="PNG", compress_level=1)


def read_png(path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        arr = np.asarray(im)
    return arr.astype(np.uint16) if arr.dtype in (np.int32, np.uint16) and arr.ndim == 2 else arr
