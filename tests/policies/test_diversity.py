"""System Neural Diversity: the distances against cases with known answers, zero for a shared
policy without ids, positive for independent policies, and a fixed observation set."""

import numpy as np
import pytest
import torch

from policies import algorithm
from policies.diversity import (
    group_agents,
    observation_set,
    snd_discrete,
    snd_gaussian,
    system_diversity,
)


def test_jensen_shannon_and_total_variation_known_values():
    logits = torch.tensor([[[0.0, -1e9]], [[-1e9, 0.0]]])  # two agents, one obs: disjoint
    d, tv, bits = snd_discrete(logits)
    assert d == pytest.approx(np.sqrt(np.log(2)))  # scipy's distance: at most sqrt(ln 2)
    assert tv == pytest.approx(1.0) and bits == pytest.approx(1.0)  # JS in bits: at most 1
    same = torch.zeros(3, 5, 4)
    assert snd_discrete(same) == (0.0, 0.0, 0.0)
    # p = (1, 0), q = (1/2, 1/2): JS = 1/2 KL(p||m) + 1/2 KL(q||m), m = (3/4, 1/4)
    logits = torch.tensor([[[0.0, -1e9]], [[0.0, 0.0]]])
    expected = 0.5 * np.log2(4 / 3) + 0.5 * (0.5 * np.log2(2 / 3) + 0.5 * np.log2(2))
    d, tv, bits = snd_discrete(logits)
    assert bits == pytest.approx(expected) and tv == pytest.approx(0.5)
    assert d == pytest.approx(np.sqrt(expected * np.log(2)))


def test_discrete_snd_is_hypermarls_scipy_distances_averaged_over_pairs_and_observations():
    """KaleabTessera/HyperMARL@03fea2a: baselines/utils/utils.py, calculate_team_diversity:
    ``scipy.spatial.distance.jensenshannon`` and ``0.5 * np.sum(np.abs(p - q))`` per
    observation and agent pair, averaged."""
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(0)
    logits = torch.tensor(rng.normal(0, 2, (4, 50, 9)))  # 4 agents, 50 observations
    p = torch.softmax(logits, -1).numpy()
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    js = np.mean([jensenshannon(p[i, o], p[j, o]) for i, j in pairs for o in range(50)])
    tv = np.mean([0.5 * np.sum(np.abs(p[i, o] - p[j, o])) for i, j in pairs for o in range(50)])
    d, t, _ = snd_discrete(logits)
    assert d == pytest.approx(js, rel=1e-9) and t == pytest.approx(tv, rel=1e-9)


def test_wasserstein_between_diagonal_gaussians():
    # agent 0: mean (0, 0), std (1, 1); agent 1: mean (3, 0), std (1, e^1 -> e)
    a = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    b = torch.tensor([[3.0, 0.0, 0.0, 1.0]])
    w2 = snd_gaussian(torch.stack([a, b]))
    assert w2 == pytest.approx(np.sqrt(9 + (np.e - 1) ** 2))
    # three agents: the mean over the three pairs
    c = torch.tensor([[0.0, 4.0, 0.0, 0.0]])
    w = snd_gaussian(torch.stack([a, b, c]))
    assert w == pytest.approx(
        (np.sqrt(9 + (np.e - 1) ** 2) + 4 + np.sqrt(25 + (np.e - 1) ** 2)) / 3
    )


def test_observation_set_is_fixed_and_sized():
    a = observation_set("mpe/dispersion-v0", size=64, seed=3)
    b = observation_set("mpe/dispersion-v0", size=64, seed=3)
    obs, mask = a["agent"]
    assert obs.shape == (64, 16) and mask is None
    np.testing.assert_array_equal(obs, b["agent"][0])
    masked = observation_set("smac/3m-v0", size=32)
    assert masked["agent"][1].shape == (32, 9)


def test_rollout_observation_set_follows_the_policy():
    """With a policy the set is what its sampled play sees: a team that always stays put
    (discrete action 0) never leaves Dispersion's origin; random play does."""
    from policies.inference import ModulePolicy, Policy

    modules, _ = modules_of("ippo", "mpe/dispersion-v0", "shared")
    module = modules["shared"]
    with torch.no_grad():
        module.pi_head.weight.zero_()
        module.pi_head.bias.copy_(torch.tensor([50.0] + [0.0] * 8))
    policy = Policy({"shared": ModulePolicy(module)})
    obs, _ = observation_set("mpe/dispersion-v0", size=128, seed=1, policy=policy)["agent"]
    assert obs.shape == (128, 16)
    assert np.all(obs[:, :4] == 0)  # own position and velocity
    rand, _ = observation_set("mpe/dispersion-v0", size=128, seed=1)["agent"]
    assert np.abs(rand[:, :4]).max() > 0


def modules_of(algo, env_id, sharing, **model):
    info = algorithm.get(algo)
    settings = info.settings()
    for k, v in model.items():
        setattr(settings.model, k, v)
    specs = info.modules(env_id, settings, sharing=sharing)
    slots = {mid: s.model_config["slot"] for mid, s in specs.rl_module_specs.items()}
    return {mid: s.build() for mid, s in specs.rl_module_specs.items()}, slots


@pytest.mark.parametrize("env_id", ["mpe/dispersion-v0", "mpe/dispersion_continuous-v0"])
def test_shared_policy_has_none_and_independent_policies_have_some(env_id):
    torch.manual_seed(0)
    obs = observation_set(env_id, size=64)
    modules, slots = modules_of("ippo", env_id, "shared")
    assert group_agents(slots) == {"agent": [("shared", i) for i in range(4)]}
    shared = system_diversity(modules, slots, obs)
    assert shared["snd"] == 0.0
    modules, slots = modules_of("ippo", env_id, "per_agent")
    nops = system_diversity(modules, slots, obs)
    assert nops["snd"] > 0
    modules, slots = modules_of("hypermarl-ippo", env_id, "shared")
    assert system_diversity(modules, slots, obs)["snd"] > 0
    if "continuous" in env_id:
        assert np.isnan(nops["snd_tv"])
    else:
        assert 0 < nops["snd_tv"] <= 1
