"""BiKT (``policies.offline.bikt``, ``training.bikt``): its codebooks quantise and keep every
code in use, its tactics read any number of agents in any order, the skill phase learns the
recorded actions, the decision-transformer phase leaves skills and tactics alone, a run
resumes across the phase boundary, and it trains on MPE (negative returns, no battle state)."""

import dataclasses
import json

import torch

from policies.offline.bikt import BiKTAgent, BiKTConfig, Codebook
from policies.offline.entity_bc import EntityBCConfig
from training import offline
from training import record as rec
from training.bikt import BiKTLearner, batch

from .replay import decoder_accuracy

CFG = BiKTConfig(
    EntityBCConfig(own_width=5, widths={"enemy": 5, "ally": 5}, n_no_attack=6), target_return=20
)


def test_codebook_picks_the_nearest_code_passes_gradients_and_restarts_unused_codes():
    torch.manual_seed(0)
    book = Codebook(4, 3)
    with torch.no_grad():
        book.codes.weight.copy_(torch.tensor([[1.0, 0, 0], [0, 2, 0], [0, 0, 3], [-1, 0, 0]]))
    z = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.2, 5.0], [-3.0, 0.1, 0.0]], requires_grad=True)
    book.eval()
    q, index, loss = book(z, 0.25)
    assert index.tolist() == [0, 2, 3]  # cosine: a code's length does not matter
    unit = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    torch.testing.assert_close(q.detach(), unit)  # the codes, at unit length
    (grad,) = torch.autograd.grad(q.sum(), z)
    assert grad.abs().sum() > 0  # straight through to the encoder
    assert (loss > 0).all()
    # training: rows that only ever pick code 0 leave 1, 2 and 3 unused until they restart
    book.train()
    rows = torch.tensor([[1.0, 0.05, 0.0], [1.0, -0.05, 0.02], [1.0, 0.0, -0.05]])
    before = book.codes.weight.detach().clone()
    for _ in range(60):
        book(rows, 0.25, torch.ones(3, dtype=torch.bool))
    moved = (book.codes.weight.detach() - before).abs().sum(1) > 0
    assert moved[1:].all()
    _, index, _ = book(rows, 0.25)
    assert len(set(index.tolist())) > 1  # the restarted codes now share the rows
    book.eval()
    frozen = book.codes.weight.detach().clone()
    book(torch.randn(50, 3), 0.25, torch.ones(50, dtype=torch.bool))
    assert torch.equal(book.codes.weight, frozen)  # never while acting


def test_tactics_read_any_number_of_agents_in_any_order_and_the_agent_acts_for_any_count():
    agent = BiKTAgent(CFG).eval()
    for A in (2, 5, 9):
        skills = torch.randn(4, A, CFG.code_dim)
        share = torch.softmax(torch.randn(4, CFG.skill_codes), -1)
        z = agent.tactic_encoder(skills, share)
        again = agent.tactic_encoder(skills[:, torch.randperm(A)], share)
        torch.testing.assert_close(z, again, atol=1e-5, rtol=1e-5)
        E = A + 1
        tokens = {
            "own": torch.randn(3, A, 5),
            "enemy": torch.randn(3, A, E, 5),
            "ally": torch.randn(3, A, A - 1, 5),
        }
        last = torch.full((3, A), -1)
        logits, hidden = agent(tokens, last, agent.initial_state(3 * A))
        assert logits.shape == (3, A, 6 + E) and hidden.shape == (3 * A, 2, 64)
        # no return given: the target's, the return still to get at the start
        same, _ = agent(tokens, last, agent.initial_state(3 * A), torch.full((3,), 20.0))
        torch.testing.assert_close(logits, same)
        tactic, _, _ = agent.infer(tokens, last, hidden[:, 0], torch.full((3,), 20.0))
        poorer, _, _ = agent.infer(tokens, last, hidden[:, 0], torch.zeros(3))
        assert not torch.allclose(tactic, poorer)  # the return to go is read


def test_bikt_learns_skills_then_the_transformer_and_resumes_to_the_same_weights(
    marine_sets, tmp_path
):
    cfg = offline.OfflineConfig(
        algo="bikt", pretrain_steps=60, steps=10, batch_episodes=8, checkpoint_every=20, seed=2
    )
    report = offline.train(marine_sets, tmp_path / "a", cfg)
    assert report["steps"] == 70 and report["algo"] == "bikt"
    progress = json.loads((tmp_path / "a" / "progress.json").read_text())
    losses = [loss for _, loss in progress["losses"]]
    assert losses[2] < 0.8 * losses[0], losses  # steps 20, 40, 60: skills and tactics
    tasks = [offline.load_task(d) for d in marine_sets]
    mcfg = offline.model_config(tasks, cfg)
    best = max(float(t.reward.sum(1).max()) for t in tasks)
    assert mcfg.target_return == best > 0
    learner = BiKTLearner(mcfg).eval()
    learner.load_state_dict(
        torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    )
    b = batch(tasks[1], torch.arange(12))
    # the return to go at the first step is the episode's team return, and it only falls
    torch.testing.assert_close(b["return_to_go"][:, 0], tasks[1].reward[:12].sum(1))
    assert (b["return_to_go"][:, 1:] <= b["return_to_go"][:, :-1] + 1e-6).all()
    with torch.no_grad():
        lab = learner.labels(b, learning=False)
    assert len(lab.code[b["acted"].bool()].unique()) > 1  # not one skill for everything
    assert decoder_accuracy(learner.agent.decoder, b, lab.skill, b["actions"].shape[1]) > 0.6
    # 61 task batches (the skills and one of the transformer), then the rest
    offline.train(marine_sets, tmp_path / "b", dataclasses.replace(cfg, steps=1))
    part = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    offline.train(marine_sets, tmp_path / "b", cfg)
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    vq = ("skill_encoder.", "skill_proj.", "skill_book.", "decoder.", "tactic_encoder.")
    vq += ("tactic_book.", "tactic_decoder.")
    dt = ("backbone.", "return_embed.", "tactic_head.", "skill_head.")
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=0, rtol=0)
        name = k.removeprefix("agent.")
        if name.startswith(vq):  # the transformer's phase leaves skills and tactics alone
            torch.testing.assert_close(part[k], a[k], atol=0, rtol=0)
        else:
            assert name.startswith(dt), k
            if k.endswith("weight"):
                assert not torch.equal(part[k], a[k]), k
    rows = offline.zero_shot(tmp_path / "a", ["smac/4m-v0"], episodes=4)
    assert rows[0]["episodes"] == 4 and not rows[0]["source"]


def test_bikt_trains_on_mpe_and_plays_more_agents_than_it_saw(ray_session, tmp_path):
    spread = tmp_path / "spread"
    rec.record("random", spread, env="mpe/simple_spread-v3", episodes=6, workers=1, seed=0)
    cfg = offline.OfflineConfig(
        algo="bikt", pretrain_steps=4, steps=2, batch_episodes=4, checkpoint_every=3
    )
    offline.train([str(spread)], tmp_path / "run", cfg)
    model, meta = offline.load_model(tmp_path / "run")
    assert meta["algo"] == "bikt" and model.cfg.target_return < 0  # MPE's rewards are costs
    seen, more = offline.zero_shot(
        tmp_path / "run", ["mpe/simple_spread-v3", "mpe/simple_spread-v3:N=5"], episodes=3
    )
    assert seen["source"] and not more["source"]
    assert more["env"] == "mpe/simple_spread-v3:N=5" and more["env_args"] == {"N": 5}
    assert more["episodes"] == 3 and more["return_mean"] < 0
    assert more["return_ci95"][0] < more["return_mean"] < more["return_ci95"][1]
    assert more["length_mean"] == 25  # mpe2's max_cycles: a spread never ends early
