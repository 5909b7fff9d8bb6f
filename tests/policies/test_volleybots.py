"""VolleyBots' released 3v3 policies in Arena: the converted tensors are the manifest's, the
actor is VolleyBots' network, Arena's 3v3 observation is VolleyBots' element by element, and
the populations play Arena's matches and cross-play."""

import hashlib
import json

import numpy as np
import pytest
import torch

import envs.volleyball  # noqa: F401 - sets MUJOCO_GL before anything imports mujoco
from policies.volleybots import POPULATIONS, WEIGHTS, VolleyBotsTeam, load_members, manifest


def test_weights_are_the_manifests_and_the_members_have_volleybots_shapes():
    m = manifest()
    assert m["commit"] == "680493a9f139fcbbab4c984d202b967d0fc4267e"
    sizes = {"sp": (1, 1), "fsp": (10, 3), "psro_uniform": (4, 3), "psro_nash": (8, 3)}
    for name in POPULATIONS:
        pop = m["populations"][name]
        digest = hashlib.sha256((WEIGHTS / f"{name}.npz").read_bytes()).hexdigest()
        assert digest == pop["npz_sha256"], name
        assert (pop["members"], pop["agents_per_member"]) == sizes[name]
        members = load_members(name)
        assert len(members) == pop["members"]
        p = members[0].p
        assert p["encoder.0.weight"].shape == (sizes[name][1], 57)  # LayerNorm(57)
        assert p["encoder.1.layers.0.weight"].shape == (sizes[name][1], 256, 57)
        assert p["act_dist.fc_mean.weight"].shape == (sizes[name][1], 4, 128)
    nash = m["populations"]["psro_nash"]["meta_policy"]
    assert len(nash["0"]) == 8 and sum(nash["0"]) == pytest.approx(1.0, abs=1e-6)
    assert nash["0"][:5] == [0.0] * 5  # the Nash mixture uses the last three members only


def _upstream_actor(params: dict, agent: int) -> torch.nn.Module:
    """VolleyBots' actor as its code builds it (``make_encoder``: LayerNorm(57), then ``MLP``
    with ELU and LayerNorm after every Linear; ``CustomDiagGaussian.fc_mean``)."""
    nn = torch.nn
    net = nn.Sequential(
        nn.LayerNorm(57),
        nn.Linear(57, 256), nn.ELU(), nn.LayerNorm(256),
        nn.Linear(256, 128), nn.ELU(), nn.LayerNorm(128),
        nn.Linear(128, 128), nn.ELU(), nn.LayerNorm(128),
        nn.Linear(128, 4),
    )  # fmt: skip
    names = ["encoder.0"] + [f"encoder.1.layers.{i}" for i in range(9)] + ["act_dist.fc_mean"]
    state = {}
    for k, layer in enumerate(net):
        for attr in ("weight", "bias"):
            if hasattr(layer, attr):
                state[f"{k}.{attr}"] = params[f"{names[k]}.{attr}"][agent]
    net.load_state_dict(state)
    return net


@pytest.mark.parametrize("name", ["sp", "psro_nash"])
def test_the_actor_is_volleybots_network_per_drone(name):
    member = load_members(name)[-1]
    obs = torch.randn(5, 3, 57)
    got = member.mean(obs)
    for drone in range(3):
        agent = 0 if member.agents == 1 else drone  # sp shares one actor; populations do not
        want = _upstream_actor(member.p, agent)(obs[:, drone])
        torch.testing.assert_close(got[:, drone], want, atol=1e-5, rtol=1e-5)


def _upstream_observation(core) -> np.ndarray:
    """The 57 numbers of VolleyBots' ``Volleyball3v3._compute_state_and_obs`` (symmetric obs,
    absolute drone positions), written from its code over Arena's world state: ``[B, 6, 57]``
    in drone order (near 0-2, far 3-5)."""
    from envs.volleyball.physics import quat_axes

    w = core.worlds
    B = w.pos.shape[0]

    def fix(q):  # w of (w, x, y, z) >= 0
        return np.where(q[..., :1] < 0, -q, q)

    def multiply(a, b):  # Hamilton product
        aw, ax, ay, az = np.moveaxis(a, -1, 0)
        bw, bx, by, bz = np.moveaxis(b, -1, 0)
        return np.stack(
            [
                aw * bw - ax * bx - ay * by - az * bz,
                aw * bx + ax * bw + ay * bz - az * by,
                aw * by - ax * bz + ay * bw + az * bx,
                aw * bz + ax * by - ay * bx + az * bw,
            ],
            -1,
        )

    pos, rot = w.pos.copy(), fix(w.quat.copy())
    vel, ang, throttle = w.vel.copy(), w.angvel.copy(), w.throttle * 2 - 1
    xy = np.array([-1.0, -1.0, 1.0])
    # transfer_root_state_to_the_other_side for drones 3-5
    rot_far = fix(multiply(np.broadcast_to([0.0, 0, 0, 1], rot[:, 3:].shape), rot[:, 3:]))
    s_pos = np.concatenate([pos[:, :3], pos[:, 3:] * xy], 1)
    s_rot = np.concatenate([rot[:, :3], rot_far], 1)
    s_vel = np.concatenate([vel[:, :3], vel[:, 3:] * xy], 1)
    s_ang = np.concatenate([ang[:, :3], ang[:, 3:] * xy], 1)
    axes = quat_axes(s_rot)
    heading, up = axes[..., 0, :], axes[..., 2, :]
    near_anchor = np.array(
        [[3.0, -1.5, 2.0], [3.0, 1.5, 2.0], [6.0, 0.0, 2.0]]
    )  # Volleyball3v3.yaml
    anchor = np.concatenate([near_anchor, near_anchor * xy])
    mirror = np.concatenate([np.ones((3, 3)), np.tile(xy, (3, 1))])  # [6, 3]
    rpos_anchor = (pos - anchor) * mirror
    rpos_ball = (w.ball_pos[:, None] - pos) * mirror
    ball_vel = np.repeat(w.ball_vel[:, None], 6, 1) * mirror
    table = np.array([[[1.0, 0]] * 3 + [[0, 1.0]] * 3, [[0, 1.0]] * 3 + [[1.0, 0]] * 3])
    turn = table[core.side]  # turn_to_obs(which_side)
    ident = np.tile(np.eye(3), (2, 1))[None].repeat(B, 0)
    hit = np.eye(2)[core.already_hit.astype(int)]  # one_hot(already_hit, 2)
    team0 = pos.reshape(B, 18)
    team1 = (pos[:, [3, 4, 5, 0, 1, 2]] * xy).reshape(B, 18)
    drones = np.stack([team0] * 3 + [team1] * 3, 1)
    parts = [s_pos, s_rot, s_vel, s_ang, heading, up, throttle, rpos_anchor, rpos_ball, ball_vel,
             turn, ident, hit, drones]  # fmt: skip
    return np.concatenate(parts, -1)


def test_arena_3v3_observation_is_volleybots_element_by_element():
    from envs.volleyball.match import Match3v3

    core = Match3v3(8, 0, auto_reset=False, random_serve=True, start_noise=0.4)
    step = core.reset()
    rng = np.random.default_rng(0)
    checked = 0
    for t in range(40):  # tilted, spinning drones, the ball in flight, both sides serving
        actions = {team: rng.uniform(-0.2, 0.6, (8, 3, 4)) for team in ("near", "far")}
        step = core.step(actions)
        if t % 8 == 7:
            want = _upstream_observation(core)
            got = np.concatenate([step.obs["near"], step.obs["far"]], 1)
            assert got.shape == want.shape == (8, 6, 57)
            np.testing.assert_allclose(got, want, atol=1e-5)
            checked += 1
    assert checked == 5 and set(core.serving) == {0, 1}
    assert np.abs(core.worlds.angvel).max() > 0.1 and np.abs(core.worlds.quat[..., 1:]).max() > 0.05


def test_a_population_draws_members_from_its_meta_policy_per_game():
    team = VolleyBotsTeam("psro_nash", side=1, seed=0)
    nash = np.asarray(manifest()["populations"]["psro_nash"]["meta_policy"]["1"])
    np.testing.assert_allclose(team.weights, nash / nash.sum())
    obs = np.zeros((400, 3, 57), np.float32)
    actions, _ = team.act_group(obs, explore=False)
    assert actions.shape == (400, 3, 4)
    assert set(team.choice) <= {5, 6, 7}  # the members with Nash weight
    first = team.choice.copy()
    ended = np.zeros(400, bool)
    ended[:200] = True
    team.episodes_ended(ended)
    assert (team.choice[200:] == first[200:]).all() and (team.choice[:200] != first[:200]).any()
    # one member alone; greedy actions are the member's means
    only = VolleyBotsTeam("fsp", member=3)
    got, _ = only.act_group(obs[:2], explore=False)
    want = load_members("fsp")[3].mean(torch.from_numpy(obs[:2])).numpy()
    np.testing.assert_allclose(got, want, atol=1e-6)
    with pytest.raises(ValueError, match="known: sp, fsp"):
        VolleyBotsTeam("mappo")
    with pytest.raises(ValueError, match="members 0-9"):
        VolleyBotsTeam("fsp", member=10)


def test_volleybots_self_play_serves_over_the_net_in_arena():
    """VolleyBots' SP actor, from its start on the anchors (its protocol), serves the ball
    over the net in Arena's MuJoCo match: the layout and action mapping work end to end."""
    from envs.volleyball.match import Match3v3
    from training.hierarchy.team import Points

    torch.manual_seed(0)
    core = Match3v3(16, 0, auto_reset=False, random_serve=True, start_noise=0.0)
    step = core.reset()
    near, far = VolleyBotsTeam("sp", 0, seed=1), VolleyBotsTeam("sp", 1, seed=2)
    points = Points(core)
    while points.live.any() and core.t.max() < core.max_steps:
        actions = {
            "near": near.act_group(step.obs["near"], explore=False)[0],
            "far": far.act_group(step.obs["far"], explore=False)[0],
        }
        step = core.step(actions)
        points.record(step)
    report = points.report()
    served = report["by_server"]
    assert served["near"]["points"] + served["far"]["points"] == 16
    for side in ("near", "far"):
        assert served[side]["serve_over"] >= 0.75, served


def test_crossplay_takes_volleybots_populations_beside_a_run(tmp_path):
    from tests.arena.test_cli import arena
    from training.hierarchy.team import BUNDLE

    out = tmp_path / "cp.json"
    proc = arena("crossplay", str(BUNDLE / "opponent"), "--volleybots", "sp,psro_nash",
                 "--games", "4", "--num-envs", "4", "--out", str(out), "--json")  # fmt: skip
    report = json.loads(proc.stdout)
    assert report["players"] == ["opponent", "volleybots:sp", "volleybots:psro_nash"]
    assert report["games_per_pair"] == 4 and report["start_noise"] == 0.0
    wins, draws = np.array(report["wins"]), np.array(report["draws"])
    assert ((wins + wins.T + draws)[~np.eye(3, dtype=bool)] == 4).all()
    assert sum(report["elo"]) == pytest.approx(3000.0, abs=0.2)  # each rounded to 0.1
    assert json.loads(out.read_text())["players"] == report["players"]
    bad = arena("crossplay", "--volleybots", "mappo", "--out", str(out), check=False)
    assert bad.returncode == 2 and "unknown VolleyBots population" in bad.stderr
    alone = arena("crossplay", "--volleybots", "sp", check=False)
    assert alone.returncode == 2 and "cross-play needs 2 players" in alone.stderr


def test_every_population_is_an_opponent_of_the_hierarchy_and_its_cli():
    from policies.volleybots.convert import POPULATIONS as CONVERTED
    from training.commands import OPPONENT_CHOICES
    from training.hierarchy.team import OPPONENTS

    assert tuple(CONVERTED) == POPULATIONS == tuple(manifest()["populations"])
    assert OPPONENT_CHOICES == OPPONENTS
    assert {f"volleybots:{name}" for name in POPULATIONS} <= set(OPPONENTS)
