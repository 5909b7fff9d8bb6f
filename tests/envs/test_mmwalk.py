"""The walking simulator (envs/mmwalk): scenes, panoramas, encodings, walks, the dataset
layout, its VQA against the ground truth, and resuming a killed generation."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from envs.mmwalk import dataset, render, scene, scoring, vqa, walk
from envs.mmwalk.tags import TAG
from envs.registry import EnvError

ROOT = Path(__file__).resolve().parents[2]


def test_facts_match_mmwalk():
    assert scene.CORNER_CASES == {
        "entrance locating": 1,
        "dead end": 1,
        "narrow path": 2,
        "barriers": 3,
        "cross the road": 3,
        "high obstacles": 3,
        "uneven road": 4,
        "cross the road in danger": 5,
    }
    assert scene.WEATHERS == {"sunny": 0, "rainy": 1, "foggy": 2, "cloudy": 1, "night": 2}
    assert len(scene.LANDMARKS) == 18 and len(scene.CATEGORIES) == 7
    assert (walk.TICK, walk.SPEED, walk.TURN) == (0.05, 3.0, math.radians(2))
    assert render.VIEW_OFFSET == {
        "walker": (0.0, 0.0, 1.5),
        "dog": (0.8, 0.0, 0.1),
        "drone": (0.0, 0.0, 3.0),
    }
    assert render.ACTOR_ROOT == 0.9 and render.CAMERA_ORIGINS == ("actor", "ground")
    assert render.PANORAMA == (1600, 900) and render.FACE == 400
    assert (TAG["sidewalk"], TAG["car"], TAG["bicycle"], TAG["sky"]) == (2, 14, 19, 11)
    assert [
        walk.risk("sunny", c)["level"]
        for c in ([], ["narrow path"], ["barriers", "dead end"], ["uneven road", "narrow path"])
    ] == ["Low-risk", "Moderate risk", "Moderate risk", "High-risk"]


@pytest.mark.parametrize("category", scene.CATEGORIES)
def test_every_category_builds_compiles_and_walks_its_route(category):
    import mujoco

    for seed in range(3):
        s = scene.build(category, seed)
        mujoco.MjModel.from_xml_string(s.mjcf(32))
        poses = walk.walk(s)
        assert len(poses) < walk.MAX_TICKS  # it reached the end of its route
        end = s.route[-1]
        assert math.hypot(poses[-1].x - end[0], poses[-1].y - end[1]) < 0.5
        steps = np.hypot(np.diff([p.x for p in poses]), np.diff([p.y for p in poses]))
        assert np.all((np.abs(steps - 0.15) < 1e-9) | (steps == 0))  # 3 m/s at 20 Hz, or a turn
        assert s.weather in scene.WEATHERS


def test_the_categories_hold_their_places_and_all_18_landmarks_appear():
    kinds = set()
    for category in scene.CATEGORIES:
        for seed in range(4):
            kinds |= {t.landmark for t in scene.build(category, seed).landmarks()}
    assert kinds == set(scene.LANDMARKS)
    assert any(t.landmark == "bus stop" for t in scene.build("Busstop", 0).things)
    assert scene.build("Cross", 0).crossing is not None
    assert "entrance locating" in [h.case for h in scene.build("Gasstation", 0).hazards]
    assert "dead end" in [h.case for h in scene.build("Parking", 0).hazards]
    assert any(t.landmark == "square" for t in scene.build("Plaza", 0).things)
    cases = {
        h.case for c in scene.CATEGORIES for seed in range(6) for h in scene.build(c, seed).hazards
    }
    assert cases == set(scene.CORNER_CASES)


def test_bad_category_and_weather_are_named():
    with pytest.raises(ValueError, match="Busstop"):
        scene.build("Beach", 0)
    with pytest.raises(ValueError, match="sunny"):
        scene.build("Plaza", 0, weather="hail")


def test_encodings_round_trip(tmp_path):
    depth = np.array([[0.0, 1.5, 12.34567], [100.0, 255.99, 4000.0]])
    stored = render.encode("depth", depth)
    assert stored.dtype == np.uint16 and stored[1, 1] == round(255.99 * 256)
    assert stored[1, 2] == 65535  # beyond 255.99 m: clipped
    np.testing.assert_allclose(render.decode("depth", stored)[:, :2], depth[:, :2], atol=1 / 512)
    semantic = np.array([[1, 2, 14], [19, 11, 24]], np.uint8)
    rgb = np.random.default_rng(0).integers(0, 256, (4, 6, 3), dtype=np.uint8)
    for name, img in (("d", stored), ("s", render.encode("semantic", semantic)), ("r", rgb)):
        render.write_png(tmp_path / f"{name}.png", img)
        back = render.read_png(tmp_path / f"{name}.png")
        assert back.dtype == img.dtype and np.array_equal(back, img)


def test_stitching_puts_each_face_where_its_direction_is():
    table = render.StitchTable(64, 32, 16, render.VIEW_FACES["walker"])
    faces = np.stack([np.full((16, 16), k, float) for k in range(4)])[..., None]
    pano = table.bilinear(faces)[..., 0]
    row = 16  # the horizon
    # longitude -180..180 left to right: back, left, front, right, back
    assert [pano[row, c] for c in (0, 16, 32, 48)] == [2.0, 3.0, 0.0, 1.0]
    assert pano[0, 32] == 0.0 and not table.shown.reshape(32, 64)[0, 32]  # the up face: black


def _lone_landmark_scene(offset, kind="traffic lights"):
    s = scene.Scene("Cross", 0, "sunny")
    s.add("ground", [scene.box(0, 0, -0.1, 40, 40, 0.1, "sidewalk", "gray")])
    x, y = offset
    parts = scene.LANDMARK_BUILDERS[kind](x, y, "red")
    s.add(kind, parts, (x, y), kind, "red")
    s.route = [(0.0, 0.0), (10.0, 0.0)]
    return s


def test_a_landmark_shows_at_its_clock_direction_and_distance():
    # 10 m away, 60 degrees right of straight ahead: 2 o'clock
    offset = (10 * math.cos(math.radians(-60)), 10 * math.sin(math.radians(-60)))
    s = _lone_landmark_scene(offset)
    pano = render.Panoramas(s, size=(360, 180), face=90)
    try:
        pano.place((0.0, 0.0), 0.0, np.zeros((0, 3)))
        out = pano.view("walker", ("semantic", "depth"))
    finally:
        pano.close()
    cols = np.flatnonzero((out["semantic"] == TAG["traffic_light"]).any(0))
    lon = (cols.mean() + 0.5) / 360 * 360 - 180
    assert lon == pytest.approx(60, abs=3)  # right of the middle of the panorama
    light = out["semantic"] == TAG["traffic_light"]
    # planar depth of the right face, whose axis is 30 degrees off the light
    assert np.median(out["depth"][light]) == pytest.approx(
        10 * math.cos(math.radians(30)), rel=0.05
    )
    pose = walk.Pose(0.0, 0.0, 0.0, "")
    seen = walk.visible_objects(s, out["geom"], pano.owner, pose, np.zeros((0, 3)), 3)
    [seen] = [o for o in seen if o["landmark"]]
    assert (seen["landmark"], seen["clock"], seen["distance"]) == ("traffic lights", 2, 10.0)
    assert walk.clock(0, 5, 0.0) == 9 and walk.clock(-5, 0, 0.0) == 6 and walk.clock(5, 0, 0) == 12


@pytest.mark.parametrize(
    "origin, heights",
    [("actor", {"walker": 2.4, "dog": 1.0, "drone": 3.9}), ("ground", {"walker": 1.5, "dog": 0.1})],
)
def test_each_camera_sits_at_its_height(origin, heights):
    """Over flat ground a face's bottom-centre pixel looks 45 degrees down (less half a pixel)
    and sees the ground at a planar depth of the camera's height / tan(that angle)."""
    s = _lone_landmark_scene((10.0, 0.0))
    face = 90
    pano = render.Panoramas(s, size=(4 * face, 2 * face), face=face, camera_origin=origin)
    try:
        pano.place((0.0, 0.0), 0.0, np.zeros((0, 3)))
        for view, height in heights.items():
            depth = pano.faces(view, "depth", ("back",))[0]
            slope = 1 - 1 / face  # the bottom row's centre, half a pixel above the edge
            assert depth[-1, face // 2] * slope == pytest.approx(height, abs=0.02), view
    finally:
        pano.close()
    with pytest.raises(ValueError, match="camera_origin 'feet': choose from actor, ground"):
        render.Panoramas(s, size=(64, 32), face=16, camera_origin="feet")


def test_imu_action_and_corner_cases():
    s = scene.build("Cross", 2)
    poses = walk.walk(s)
    record = walk.imu(poses, 3)
    text = walk.imu_text(record)
    # mmWalk's capture.py: f"Accelerometer: ({a.x}, {a.y}, {a.z})\n" of CARLA's Python floats
    num = r"(-?\d+(?:\.\d+)?(?:e[-+]\d+)?)"
    three = rf"\({num}, {num}, {num}\)"
    m = re.fullmatch(rf"Accelerometer: {three}\nGyroscope: {three}\nCompass: {num}\n", text)
    assert m, text
    read = [float(x) for x in m.groups()]
    want = [*record["accelerometer"], *record["gyroscope"], record["compass"]]
    assert read == [float(x) for x in want] and read[2] == 9.81
    assert walk.action_text("WA") == "W: 1\nA: 1\nS: 0\nD: 0\n"
    assert (
        walk.action_name("WD") == "Forward Turning Right" and walk.action_name("") == "Stationary"
    )
    crossing = [walk.corner_cases(s, p) for p in poses if abs(p.y) < 2]
    case = "cross the road in danger" if s.pedestrian_light == "red" else "cross the road"
    assert crossing and all(case in c for c in crossing)


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("mmwalk")
    cfg = dataset.GenerateConfig(trajectories=7, size=(96, 48), max_frames=16, actors=0)
    manifest = dataset.generate(cfg, out)
    return out, manifest


def test_the_dataset_has_mmwalks_layout(small_dataset):
    out, manifest = small_dataset
    names = [t["trajectory"] for t in manifest["trajectories"]]
    assert names == sorted(f"{c}01" for c in scene.CATEGORIES)
    t = out / "QAFrames" / "Busstop01"
    for view in ("walker", "dog", "drone"):
        for m in ("rgb", "depth", "semantic"):
            img = render.read_png(t / view / m / "000000.png")
            assert img.shape[:2] == (48, 96)
            assert img.dtype == (np.uint16 if m == "depth" else np.uint8)
    assert (t / "imu" / "000015.txt").read_text().startswith("Accelerometer: (")
    assert (t / "action" / "000000.txt").read_text().startswith("W: ")
    meta = json.loads((t / "Json" / "000010.json").read_text())
    assert meta["views"]["dog"]["depth"] == "dog/depth/000010.png"
    assert len(list((t / "Json").iterdir())) == 16
    assert set(manifest["splits"].values()) == {"train", "val", "test"}
    walker_rgb = render.read_png(t / "walker" / "rgb" / "000000.png")
    assert walker_rgb[:4].max() == 0 and walker_rgb[20:28].std() > 3  # up face black
    drone_rgb = render.read_png(t / "drone" / "rgb" / "000000.png")
    assert drone_rgb[:4].max() > 0  # the drone renders its up face


def test_every_vqa_category_matches_the_ground_truth(small_dataset):
    out, manifest = small_dataset
    seen = set()
    for split in ("train", "val", "test"):
        for cat in vqa.CATEGORIES:
            for line in (out / f"{split}_data_chat" / f"{cat}.jsonl").open():
                r = json.loads(line)
                seen.add(cat)
                images = [c["image"] for c in r["conversation"][0]["content"][:4]]
                assert all((out / f"{split}_data_chat" / p).resolve().is_file() for p in images)
                meta = json.loads(
                    (out / "QAFrames" / r["trajectory"] / "Json" / f"{r['frame']}.json").read_text()
                )
                _check(r, meta)
    assert seen == set(vqa.CATEGORIES)


def _check(r: dict, meta: dict) -> None:
    q = r["conversation"][0]["content"][-1]["text"].split("Question: ")[1].lower()
    value, walker = r["answer_value"], meta["objects"]["walker"]
    cat = r["category"]
    answer = r["conversation"][1]["content"][0]["text"]
    if cat == "E1":
        assert value["value"] == (meta["weather"] if "weather" in q else meta["action"])
    elif cat == "E2" and "corner case" in q:
        assert (value == "Yes") == bool(meta["corner_cases"])
    elif cat == "E2":
        names = [k for k in (*scene.LANDMARKS, *vqa.E2_OBJECTS) if k.lower() in q]
        kind = max(names, key=len)  # "big dumpster" over "dumpster"
        assert (value == "Yes") == any(kind in (o["landmark"], o["kind"]) for o in walker)
    elif cat == "E3":
        ((name, _, kinds),) = [k for k in vqa.E3_KINDS if q.startswith(f"how many {k[0]} ")]
        assert value == sum(
            1 for o in walker if (o["landmark"] if kinds is None else o["kind"] in kinds)
        )
        assert str(value) in answer
    elif cat == "E4":
        assert value["value"] in {o["color"] for o in walker if o["kind"] in q}
    elif cat == "M1":
        assert value in [{"distance": o["distance"], "clock": o["clock"]} for o in walker]
        assert scoring.match("direction", value, "", answer) == 5.0
    elif cat == "H1":
        assert value["value"] == walk.risk(meta["weather"].lower(), meta["corner_cases"])["level"]
    elif cat == "H2":
        assert value == [o["landmark"] for o in walker if o["landmark"]][:3]
    elif cat == "M3":
        shown = {v: len(meta["objects"][v]) for v in vqa.VIEWS}
        if "environment" in q and "dangerous" not in q:  # every thing counts
            assert shown[value] == max(shown.values())
    if r["answer_type"] != "text":
        assert scoring.match(r["answer_type"], value, answer, answer) == 5.0  # the truth is right


def test_a_dataset_is_never_resumed_with_other_cameras_or_size(small_dataset, tmp_path):
    out, manifest = small_dataset
    assert manifest["config"]["camera_origin"] == "actor"
    assert manifest["trajectories"][0]["camera_origin"] == "actor"
    assert json.loads((out / "generate.json").read_text()) == {
        "size": [96, 48],
        "camera_origin": "actor",
    }
    other = dataset.GenerateConfig(
        trajectories=7, size=(96, 48), max_frames=16, camera_origin="ground"
    )
    with pytest.raises(EnvError, match="--size 96x48 --camera-origin actor; resume it with"):
        dataset.generate(other, out)
    # a dataset written before generate.json existed was rendered from the ground
    old = tmp_path / "old"
    (old / "QAFrames").mkdir(parents=True)
    (old / "dataset.json").write_text(json.dumps({"config": {"size": [96, 48]}}))
    with pytest.raises(EnvError, match="--camera-origin ground"):
        dataset.generate(dataset.GenerateConfig(trajectories=1, size=(96, 48)), old)
    with pytest.raises(EnvError, match="--camera-origin 'feet': choose from actor, ground"):
        dataset.GenerateConfig(camera_origin="feet")


def test_stats_counts_the_dataset(small_dataset):
    out, manifest = small_dataset
    s = dataset.stats(out)
    assert s["trajectories"] == {c: 1 for c in scene.CATEGORIES}
    assert s["frames_total"] == 7 * 16 and s["unfinished"] == []
    assert sum(sum(v.values()) for v in s["questions"].values()) == sum(
        sum(v.values()) for v in manifest["questions"].values()
    )


def test_a_killed_generation_resumes_with_nothing_lost_or_corrupt(tmp_path):
    args = [
        sys.executable,
        "-m",
        "arena",
        "mmwalk",
        "generate",
        "--trajectories",
        "2",
        "--size",
        "64x32",
        "--max-frames",
        "30",
        "--actors",
        "0",
    ]
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [*args, "--out", str(killed)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline and dataset.frames_on_disk(killed) < 10:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = dataset.frames_on_disk(killed)
    assert 10 <= partial < 60
    subprocess.run(
        [*args, "--out", str(killed)], cwd=ROOT, env=env, check=True, capture_output=True
    )
    whole = tmp_path / "whole"
    subprocess.run([*args, "--out", str(whole)], cwd=ROOT, env=env, check=True, capture_output=True)
    files = sorted(p.relative_to(whole) for p in (whole / "QAFrames").rglob("*") if p.is_file())
    assert len(files) == 2 * (1 + 30 * 12)  # trajectory.json; 9 PNGs, imu, action, Json a frame
    for rel in files:
        assert (killed / rel).read_bytes() == (whole / rel).read_bytes(), rel
    assert not [p for p in (killed / "QAFrames").iterdir() if p.name.startswith(".")]
    assert not list(killed.rglob("*.tmp"))


def test_matching_scores_numbers_directions_and_classes():
    assert scoring.match("number", 2, "2", "There are 2.") == 5.0
    assert scoring.match("number", 2, "2", "three") == 3.0
    assert scoring.match("number", 2, "2", "none") == 1.0
    where = {"distance": 10.0, "clock": 2}
    assert scoring.match("direction", where, "", "about 10 m at your 2 o'clock") == 5.0
    assert scoring.match("direction", where, "", "14 meters at your 3 o'clock") == 3.0
    assert scoring.match("direction", where, "", "at your 8 o'clock, 30 m") == 1.0
    assert scoring.match("class", "Moderate risk", "", "Moderate-risk: night.") == 5.0
    assert scoring.match("class", "Night", "", "Sunny.") == 1.0
    assert scoring.match("yesno", "No", "", "No, there is none.") == 5.0
    assert scoring.match("yesno", "No", "", "Yes.") == 1.0
    assert scoring.match("text", None, "a b", "a b") is None
    risk = {"value": "Moderate risk", "options": list(vqa.LEVELS)}
    assert scoring.match("choice", risk, "", "It is moderate-risk, not high-risk.") == 5.0
    assert scoring.match("choice", risk, "", "High-risk, not moderate risk.") == 1.0
    action = {"value": "Forward Turning Left", "options": list(vqa.ACTIONS)}
    assert scoring.match("choice", action, "", "Forward turning left.") == 5.0
    assert scoring.match("choice", action, "", "Turning left.") == 1.0
    # M3: the view named first; an answer naming all three is not right for every truth
    every = "The drone view: walker 5, drone 12, dog 3."
    assert [scoring.match("view", v, "", every) for v in vqa.VIEWS] == [1.0, 5.0, 1.0]
    assert scoring.overlap_judge("q", "a bench at 3 m", "a bench at 3 m") == 5.0
    assert scoring.overlap_judge("q", "a bench", "cars") == 1.0


def test_eval_vqa_scores_the_truth_full_and_baselines_lower(small_dataset, tmp_path):
    out, _ = small_dataset
    truth = tmp_path / "truth"
    truth.mkdir()
    for p in (out / "test_data_chat").glob("*.jsonl"):
        (truth / f"{p.stem}_model.jsonl").write_text(p.read_text())  # mmWalk's naming
    perfect = scoring.evaluate(truth, out)
    assert perfect["overall"]["standardized_score"] == 100.0
    assert set(perfect["per_category"]) == set(vqa.CATEGORIES)
    scores = {}
    for kind in ("majority", "random"):
        pred = scoring.baseline(out, kind, tmp_path / kind)
        scores[kind] = scoring.evaluate(pred, out)["overall"]["standardized_score"]
        assert scores[kind] < 100.0
    one_file = tmp_path / "all.jsonl"
    one_file.write_text(
        "".join((tmp_path / "majority" / f"{c}.jsonl").read_text() for c in vqa.CATEGORIES)
    )
    assert scoring.evaluate(one_file, out)["overall"]["standardized_score"] == scores["majority"]
    # M3's truth varies, so one answer to every M3 question is not 100 (it was: the answer
    # named all three views and any view's name anywhere matched)
    rows = scoring.load_truth(out, "train")["M3"]
    assert len({r["answer_value"] for r in rows}) > 1
    const = tmp_path / "const"
    const.mkdir()
    for f in (out / "train_data_chat").glob("*.jsonl"):
        (const / f.name).write_text(f.read_text())
    for r in rows:
        r["conversation"][1]["content"][0]["text"] = (
            "The walker view, then the drone and dog views."
        )
    (const / "M3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    m3 = scoring.evaluate(const, out, split="train")
    assert 0.0 < m3["per_category"]["M3"]["standardized_score"] < 100.0
    (tmp_path / "majority" / "E1.jsonl").write_text("")
    with pytest.raises(ValueError, match="line-aligned"):
        scoring.evaluate(tmp_path / "majority", out)
    judged = scoring.evaluate(
        truth, out, judge=lambda q, t, p: 5.0 if t == p else 1.0, mode="judge"
    )
    assert judged["overall"]["standardized_score"] == 100.0  # every category went to the judge
    with pytest.raises(ValueError, match="scoring mode 'gpt': one of exact, judge"):
        scoring.evaluate(truth, out, mode="gpt")
    with pytest.raises(ValueError, match="module:function"):
        scoring.load_judge("gpt")
    assert scoring.load_judge("envs.mmwalk.scoring:overlap_judge") is scoring.overlap_judge


def _walker_at(core, i, x, y, yaw):
    place = core.place(int(core.place_of[i]))
    core.pose[i] = (x, y, yaw)
    core.progress[i] = place.along(x, y)[0]
    return place


def test_navigate_pays_progress_the_goal_and_the_hazards():
    from envs.mmwalk.navigate import NavigateBatch

    core = NavigateBatch(1, seed=0, scenes=1, size=16, auto_reset=False)  # scene 0: Busstop
    core.reset(seed=0)
    place = core.place(0)
    assert place.scene.category == "Busstop"
    x, y, heading = place.at(2.0)
    _walker_at(core, 0, x, y, heading)
    step = core.step({"walker": np.array([[0]])})  # forward along the route: 0.75 m
    assert core.reward_terms["progress"][0, 0] == pytest.approx(0.75, abs=0.05)
    assert step.obs["walker"].dtype == np.uint8 and step.obs["walker"].shape == (1, 1, 16, 16, 3)
    end = place.points[-1]
    _walker_at(core, 0, end[0] - 1.2, end[1], 0.0)
    step = core.step({"walker": np.array([[0]])})
    assert step.terminated[0] and core.reward_terms["goal"][0, 0] == 10.0
    assert step.info["success"][0] == 1.0
    core.reset(seed=0)
    _walker_at(core, 0, 0.0, 1.75, -math.pi / 2)  # on the road, off any crosswalk
    core.step({"walker": np.array([[1]])})  # turning: no move
    assert core.reward_terms["road"][0, 0] == -0.3
    _walker_at(core, 0, 0.0, 5.5, math.pi / 2)  # facing a building 2 m away
    for _ in range(4):
        core.step({"walker": np.array([[0]])})
    assert core.reward_terms["bump"][0, 0] == -0.5 and core.pose[0, 1] < scene.WALK + 0.5


def test_navigate_options_are_checked():
    import envs

    with pytest.raises((ValueError, EnvError), match="views"):
        envs.make("mmwalk/navigate-v0", views=("cat",))
    with pytest.raises(EnvError, match=r"scenes must be in 1\.\.256, got 100000"):
        envs.make("mmwalk/navigate-v0", scenes=100_000)  # each scene keeps a renderer
    with pytest.raises((ValueError, EnvError), match="camera_origin 'feet': choose from"):
        envs.make("mmwalk/navigate-v0", camera_origin="feet")
    env = envs.make("mmwalk/navigate-v0", views=("walker", "dog"), modalities=("depth", "semantic"))
    obs, _ = env.reset(seed=1)
    assert obs["walker"].shape == (84, 84, 4) and obs["walker"].dtype == np.uint8


def test_unrendered_faces_are_unlabeled_and_the_rendered_sky_is_sky():
    """mmWalk's capture writes zeros where a walker or dog view renders no face (up, down):
    class 0 (unlabeled) in the semantic panorama, as RGB and depth there; the sky a face does
    render is class 11."""
    s = _lone_landmark_scene((10.0, 0.0))
    pano = render.Panoramas(s, size=(360, 180), face=90)
    try:
        pano.place((0.0, 0.0), 0.0, np.zeros((0, 3)))
        for view in ("walker", "dog", "drone"):
            out = pano.view(view)
            hidden = ~pano.table(view).shown.reshape(180, 360)
            assert hidden.any() == (view != "drone")
            assert np.all(out["semantic"][hidden] == TAG["unlabeled"])
            assert np.all(out["rgb"][hidden] == 0) and np.all(out["depth"][hidden] == 0)
            assert out["semantic"].dtype == np.uint8
            assert (out["semantic"][~hidden] == TAG["sky"]).any()  # above the horizon
    finally:
        pano.close()
