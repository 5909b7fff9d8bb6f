"""ODIS (``policies.offline.odis``, ``training.odis``): its attention and mixer compute what
ODIS's code computes, skill discovery learns the recorded actions, the policy phase leaves the
skills alone, and a run resumes across the phase boundary (datasets without unit states are
refused: ``test_offline.py``)."""

import dataclasses
import json

import numpy as np
import torch

from policies.offline.entity_bc import EntityBCConfig
from policies.offline.odis import ODISConfig, QAttnMixer, StateEncoder, unit_attention
from training import offline

from .replay import decoder_accuracy

CFG = ODISConfig(
    EntityBCConfig(own_width=5, widths={"enemy": 5, "ally": 5}, n_no_attack=6),
    state_ally=4,
    state_enemy=3,
)


def odis_attention(embed, query, key):
    """ODIS's StateEncoder lines, in its layout ``[entities, bs, 1, e]``."""
    n, bs, _, e = embed.shape
    d = query.out_features
    proj_query = query(embed).permute(1, 2, 0, 3).reshape(bs, n, d)
    proj_key = key(embed).permute(1, 2, 3, 0).reshape(bs, d, n)
    energy = torch.bmm(proj_query / (d ** (1 / 2)), proj_key)
    attn_score = torch.softmax(energy, dim=1)
    proj_value = embed.permute(1, 2, 3, 0).reshape(bs, e, n)
    return torch.bmm(proj_value, attn_score).squeeze(1).permute(0, 2, 1)


def state(R, A, E, n_actions):
    last = torch.nn.functional.one_hot(torch.randint(0, n_actions, (R, A)), n_actions).float()
    return {"ally": torch.randn(R, A, 4), "enemy": torch.randn(R, E, 3), "last_action": last}


def test_unit_attention_is_odis_softmax_over_queries():
    enc = StateEncoder(CFG)
    embed = torch.randn(7, 5, 64)  # [bs, entities, e]
    ours = unit_attention(embed, enc.query, enc.key)
    theirs = odis_attention(embed.permute(1, 0, 2)[:, :, None], enc.query, enc.key)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_mixer_is_monotonic_and_reads_any_unit_count_in_any_enemy_order():
    mixer = QAttnMixer(CFG)
    for A, E in ((3, 3), (5, 6), (10, 12)):
        s = state(4, A, E, 6 + E)
        qs = torch.randn(4, A, requires_grad=True)
        q_tot = mixer(qs, s)
        assert q_tot.shape == (4,)
        (grad,) = torch.autograd.grad(q_tot.sum(), qs)
        assert (grad >= 0).all()  # QMIX's |w|: more for one agent is never less for the team
        perm = torch.randperm(E)
        again = mixer(qs, dict(s, enemy=s["enemy"][:, perm]))
        torch.testing.assert_close(again, q_tot, atol=1e-5, rtol=1e-5)
    # the state encoder's enemy bit: some agent attacks that enemy now
    enc = StateEncoder(CFG)
    s = state(1, 3, 3, 9)
    attack_enemy_2 = torch.tensor([[8, 1, 1]])
    out = enc(s, attack_enemy_2)
    swapped = enc(dict(s, enemy=s["enemy"][:, [0, 2, 1]]), torch.tensor([[7, 1, 1]]))
    torch.testing.assert_close(out, swapped, atol=1e-5, rtol=1e-5)


def test_episodes_carry_their_final_observation_rewards_and_ends(marine_sets):
    task = offline.load_task(marine_sets[0])
    card = json.loads(open(f"{marine_sets[0]}/card.json").read())
    n = task.length
    assert task.filled.sum(1).tolist() == n.tolist()
    rows = torch.arange(len(n))
    # the final state: the side that won still stands
    final = task.state["ally"][rows, n].abs().sum((1, 2)) + task.state["enemy"][rows, n].abs().sum(
        (1, 2)
    )
    assert (final > 0).all()
    assert (task.actions[rows, n] == 0).all() and not task.filled[rows, n].any()
    # SMAC's battles end by a side's death here, well before the limit: every last step ends
    assert task.terminal[rows, n - 1].all() and task.terminal.sum() == len(n)
    returns = task.reward.sum(1) * len(card["agents"])  # the team reward, every agent's
    np.testing.assert_allclose(returns.mean(), card["return_mean"], rtol=1e-4)
    assert task.state["last_action"].shape[-2:] == (3, 9)


def test_odis_learns_skills_then_q_over_them_and_resumes_to_the_same_weights(marine_sets, tmp_path):
    cfg = offline.OfflineConfig(
        algo="odis", pretrain_steps=60, steps=10, batch_episodes=8, checkpoint_every=20, seed=2
    )
    report = offline.train(marine_sets, tmp_path / "a", cfg)
    assert report["steps"] == 70 and report["algo"] == "odis"
    losses = [
        loss for step, loss in json.loads((tmp_path / "a" / "progress.json").read_text())["losses"]
    ]
    pretrain = losses[:3]  # steps 20, 40, 60
    assert pretrain[-1] < 0.7 * pretrain[0], losses
    # the decoder, fed the state encoder's skills, now picks the recorded actions
    from training.odis import ODISLearner, batch

    tasks = [offline.load_task(d) for d in marine_sets]
    learner = ODISLearner(offline.model_config(tasks, cfg))
    learner.load_state_dict(
        torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    )
    b = batch(tasks[1], torch.arange(12))
    with torch.no_grad():
        B, L, A = b["actions"].shape
        flat = {k: v.reshape(B * L, *v.shape[2:]) for k, v in b["state"].items()}
        skills = learner.agent.state_skills(flat, b["actions"].reshape(B * L, A)).argmax(-1)
        skills = torch.nn.functional.one_hot(skills, 3).float().view(B, L, A, 3)
    assert decoder_accuracy(learner.agent.decoder, b, skills, L - 1) > 0.6
    # 62 task batches (pretraining and one round of Q-learning), then the rest
    offline.train(marine_sets, tmp_path / "b", dataclasses.replace(cfg, steps=2))
    part = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    offline.train(marine_sets, tmp_path / "b", cfg)
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=0, rtol=0)
        frozen = k.startswith(("agent.decoder.", "agent.state_encoder.", "agent.encoder."))
        learned = k.startswith(("agent.obs_encoder.", "agent.q.", "mixer."))
        if frozen:  # the policy phase leaves the skills as pretraining left them
            torch.testing.assert_close(part[k], a[k], atol=0, rtol=0)
        elif learned and k.endswith("weight"):
            assert not torch.equal(part[k], a[k]), k
    rows = offline.zero_shot(tmp_path / "a", ["smac/4m-v0"], episodes=4)
    assert rows[0]["episodes"] == 4 and not rows[0]["source"]


def test_odis_trains_on_its_grid_navigation_tasks(ray_session, tmp_path):
    """ODIS's cn task set: the state holds the agents, then the landmarks in the enemy slot
    (its ``cn_decomposer.py``), no last actions; a run on cn-2 and cn-4 plays cn-3."""
    from training import record as rec

    sets = []
    for m in ("cn-2", "cn-4"):
        rec.record("random", tmp_path / m, env=f"gridmpe/cn-v0:map_name={m}", episodes=4, seed=0)
        sets.append(str(tmp_path / m))
    task = offline.load_task(sets[1])
    assert task.state["ally"].shape[-2:] == (4, 2) and task.state["enemy"].shape[-2:] == (4, 2)
    assert "last_action" not in task.state and set(task.tokens) == {"own", "ally", "landmark"}
    cfg = offline.OfflineConfig(algo="odis", pretrain_steps=4, steps=2, batch_episodes=4)
    assert offline.train(sets, tmp_path / "run", cfg)["steps"] == 6
    row = offline.zero_shot(tmp_path / "run", ["gridmpe/cn-v0:map_name=cn-3"], episodes=3)[0]
    assert row["env_args"] == {"map_name": "cn-3"} and not row["source"]
    assert 0 <= row["win_rate"] <= 1 and row["episodes"] == 3
