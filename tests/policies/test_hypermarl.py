"""HyperMARL's module: per-agent generated weights, orthogonal at init, gradients into the
embeddings and hypernetworks, one batched pass equal to a loop over agents, the id never in
the network's input; the algorithms' refusals; FuPS+ID's id input."""

import numpy as np
import pytest
import torch

from policies import algorithm
from policies.algorithm import AlgorithmMismatch
from policies.batch import AGENT_ID, OBS, STATE, BatchSpec
from policies.hypermarl.module import HyperMLP, HyperSettings


def module(env_id="mpe/dispersion-v0", algo="hypermarl-ippo", **set_):
    info = algorithm.get(algo)
    settings = info.settings()
    for key, value in set_.items():
        target, *path = key.split("__")
        obj = settings if not path else getattr(settings, target)
        setattr(obj, path[0] if path else target, value)
    specs = info.modules(env_id, settings)
    (spec,) = specs.rl_module_specs.values()
    return spec.build()


def rows(m, n=12, seed=0):
    """``n`` input rows of module ``m`` with agents 0, 1, ..., K-1, 0, 1, ..."""
    spec = BatchSpec.from_dict(m.model_config["batch_spec"])
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, *spec.obs_shape)).astype(np.float32)
    state = rng.normal(size=(n, spec.state_dim)).astype(np.float32) if spec.state_dim else None
    batch = spec.pack(obs, None, state, np.arange(n) % spec.num_ids)
    return {k: torch.tensor(v) for k, v in batch.items()}


def orthogonal_error(w: torch.Tensor, gain: float) -> float:
    """How far ``w`` [in, out] is from a gain-scaled semi-orthogonal matrix."""
    g = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
    return float((g - gain**2 * torch.eye(len(g))).abs().max())


@pytest.mark.parametrize("algo", ["hypermarl-ippo", "hypermarl-mappo"])
def test_orthogonal_per_agent_init_makes_every_agents_weights_orthogonal(algo):
    m = module(algo=algo, hyper__init="orthogonal_per_agent")
    for net, out_gain in ((m.pi_hyper, 0.01), (m.vf_hyper, 1.0)):
        layers = net.generated()
        for k, (w, b) in enumerate(layers):
            gain = out_gain if k == len(layers) - 1 else np.sqrt(2)
            assert torch.all(b == 0)
            for i in range(len(w)):
                assert orthogonal_error(w[i].detach(), gain) < 1e-4 * max(1.0, gain**2)
            for i in range(len(w)):
                for j in range(i + 1, len(w)):
                    assert not torch.allclose(w[i], w[j], atol=1e-3)
    spec = BatchSpec.from_dict(m.model_config["batch_spec"])
    first = m.pi_hyper.sizes[0]
    assert first == spec.obs_shape[0]  # the id is never concatenated with the observation
    if algo == "hypermarl-mappo":
        assert m.vf_hyper.sizes[0] == spec.state_dim  # per-agent critics on the global state


def upstream_singular_values(n_in, n_out, agents=4, hidden=64, gain=2**0.5, draws=20):
    """NumPy emulation of HyperMARL's ``MLPHyperNetwork`` at init with one-hot embeddings
    (KaleabTessera/HyperMARL@03fea2a: baselines/MAPPO/mappo_ff_shared_weights_mlp_hypernets.py,
    ``hypernet_init`` and ``__call__``): hidden Dense = flax's LeCun normal truncated at 2 std
    (zero bias), then ReLU; weight-head kernel ``[H, in*out]`` = H orthogonal ``(in, out)``
    blocks (jax's orthogonal: QR of a normal, signs of R's diagonal), zero bias."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(draws):
        std = np.sqrt(1 / agents) / 0.87962566103423978
        z = rng.normal(0, std, 8 * agents * hidden)
        w1 = z[np.abs(z) < 2 * std][: agents * hidden].reshape(agents, hidden)
        h = np.maximum(np.eye(agents) @ w1, 0)
        blocks = []
        for _ in range(hidden):
            q, r = np.linalg.qr(rng.normal(size=(max(n_in, n_out), min(n_in, n_out))))
            q = q * np.sign(np.diag(r))
            blocks.append(gain * (q if n_in >= n_out else q.T))
        w = np.einsum("kh,hio->kio", h, np.stack(blocks))
        out.append(np.linalg.svd(w, compute_uv=False))
    return np.concatenate(out)


@pytest.mark.parametrize("shape", [(16, 64), (64, 64)])
def test_upstream_init_matches_an_emulation_of_hypermarls(shape):
    """The default init is upstream's: the generated weights are NOT orthogonal per agent;
    their singular values spread as the emulation's (16x64: about 1.5-7, 64x64: 0-9)."""
    n_in, n_out = shape
    ours = []
    for seed in range(20):
        torch.manual_seed(seed)
        net = HyperMLP([n_in, n_out, 2], 4, HyperSettings(), "relu", out_gain=1.0)
        w = net.generated()[0][0].detach().numpy()
        ours.append(np.linalg.svd(w, compute_uv=False))
    ours = np.concatenate(ours)
    theirs = upstream_singular_values(n_in, n_out)
    q = [5, 25, 50, 75, 95]
    np.testing.assert_allclose(np.percentile(ours, q), np.percentile(theirs, q), rtol=0.12)
    assert abs(ours.mean() - theirs.mean()) < 0.1 * theirs.mean()
    assert ours.std() > 1.0  # far from orthogonal (all singular values sqrt 2)
    for bias in net.generated()[0][1]:
        assert torch.all(bias == 0)


def test_default_embedding_is_onehot_and_learned_when_sized():
    m = module()  # upstream: one-hot unless USE_AGENT_ID_EMBEDDINGS
    assert m.pi_hyper.embedding is None
    np.testing.assert_array_equal(m.pi_hyper.embeddings().numpy(), np.eye(4))
    m = module(hyper__embedding_dim=8)  # --set hyper.embedding_dim=8
    assert m.pi_hyper.embedding.shape == (4, 8)
    m = module(hyper__embedding="learned")
    e = m.pi_hyper.embedding.detach()  # [4 agents, 4]
    np.testing.assert_allclose((e @ e.T).numpy(), 2 * np.eye(4), atol=1e-5)


def test_batched_pass_equals_a_loop_over_agents():
    net = HyperMLP([5, 8, 3], 4, HyperSettings(), "tanh", out_gain=1.0)
    with torch.no_grad():  # move off the init so every part matters
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    x = torch.randn(20, 5)
    agent = torch.randint(0, 4, (20,))
    batched = net(x, agent)
    layers = net.generated()
    for r in range(20):
        h = x[r]
        for k, (w, b) in enumerate(layers):
            h = h @ w[agent[r]] + b[agent[r]]
            if k < len(layers) - 1:
                h = torch.tanh(h)
        torch.testing.assert_close(batched[r], h, rtol=1e-5, atol=1e-6)


def test_module_rows_use_their_own_agents_weights():
    m = module()
    batch = rows(m)
    logits, _ = m.actor({"obs": batch})
    for i in range(4):
        alone = {k: v.clone() for k, v in batch.items()}
        alone[AGENT_ID] = torch.nn.functional.one_hot(torch.full((12,), i), 4).float()
        mine = np.arange(12) % 4 == i
        other, _ = m.actor({"obs": alone})
        torch.testing.assert_close(logits[mine], other[mine])
        assert not torch.allclose(logits[~mine], other[~mine])


def test_gradients_reach_embeddings_and_hypernetworks():
    m = module(algo="hypermarl-mappo", hyper__embedding="learned")
    batch = rows(m)
    opt = torch.optim.SGD(m.parameters(), lr=1e-2)
    # Two steps: the bias heads' last layers start at zero, so their hidden layers see a
    # gradient from the second step on.
    for _ in range(2):
        opt.zero_grad()
        logits, _ = m.actor({"obs": batch})
        values, _ = m.critic({"obs": batch})
        (logits.pow(2).sum() + values.pow(2).sum()).backward()
        opt.step()
    for net in (m.pi_hyper, m.vf_hyper):
        assert net.embedding.grad is not None and net.embedding.grad.abs().sum() > 0
        for head in [*net.weight_heads, *net.bias_heads]:
            for p in head.parameters():
                assert p.grad is not None and p.grad.abs().sum() > 0


def test_recurrent_variant_shares_encoder_and_gru_and_generates_the_rest():
    m = module(algo="hypermarl-mappo", model__recurrent=True, model__hidden=[32, 32])
    assert isinstance(m.pi_gru, torch.nn.GRU) and m.pi_gru.hidden_size == 32
    assert m.pi_hyper.sizes == [32, 32, 9] and m.vf_hyper.sizes == [32, 32, 1]
    batch = rows(m)
    state = m.initial_state_rows(12)
    logits, nxt = m.step(batch, state)
    assert logits.shape == (12, 9) and nxt["actor"].shape == (12, 32)
    assert set(batch) == {OBS, STATE, AGENT_ID}


def test_refusals_name_what_is_wrong():
    info = algorithm.get("hypermarl-ippo")
    with pytest.raises(AlgorithmMismatch, match="use --policies shared"):
        info.build("mpe/dispersion-v0", info.settings(), sharing="per_agent")
    with pytest.raises(AlgorithmMismatch, match="agent groups"):
        info.build("mpe/simple_tag-v3", info.settings())
    settings = info.settings()
    settings.model.agent_id = True
    with pytest.raises(AlgorithmMismatch, match="never feeds the id"):
        info.build("mpe/dispersion-v0", settings)
    settings = info.settings()
    settings.hyper.embedding = "random"
    with pytest.raises(AlgorithmMismatch, match="learned or onehot"):
        info.build("mpe/dispersion-v0", settings)
    settings = info.settings()
    settings.hyper.init = "xavier"
    with pytest.raises(AlgorithmMismatch, match="upstream or orthogonal_per_agent"):
        info.build("mpe/dispersion-v0", settings)
    settings = info.settings()
    settings.hyper.embedding, settings.hyper.embedding_dim = "onehot", 8
    with pytest.raises(AlgorithmMismatch, match="one-hot id has no size"):
        info.build("mpe/dispersion-v0", settings)


def test_fups_with_ids_reads_the_agent_id_in_the_actor():
    plain = module(algo="ippo")
    assert BatchSpec.from_dict(plain.model_config["batch_spec"]).num_ids == 0
    m = module(algo="ippo", model__agent_id=True)
    assert BatchSpec.from_dict(m.model_config["batch_spec"]).num_ids == 4
    batch = rows(m)
    batch[OBS][:] = batch[OBS][0]  # one observation, four ids
    logits, _ = m.actor({"obs": batch})
    assert not torch.allclose(logits[0], logits[1])
    torch.testing.assert_close(logits[0], logits[4])


def test_train_logs_diversity_and_eval_plays_the_run(tmp_path):
    """As a user runs it: ``arena train --algo hypermarl-mappo`` logs SND per iteration, and
    ``arena eval`` rebuilds the module from the checkpoint's weights and plays."""
    import csv
    import json

    from tests.arena.test_cli import SMALL, arena

    out = tmp_path / "runs"
    arena("train", "mpe/dispersion-v0", "--algo", "hypermarl-mappo", "--iterations", "2",
          "--out", str(out), "--name", "h", *SMALL)  # fmt: skip
    run = out / "mpe/dispersion-v0/hypermarl-mappo/h"
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert len(rows) == 2 and all(0 < float(r["snd"]) <= 1 for r in rows)
    assert all(0 < float(r["snd_tv"]) <= 1 for r in rows)
    proc = arena("eval", str(run), "--episodes", "2", "--json")
    assert json.loads(proc.stdout)["episodes"] == 2
