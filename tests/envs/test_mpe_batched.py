"""The vectorised simple_spread core equals mpe2 step by step, resets included."""

import numpy as np
import pytest

import envs
from envs.mpe.batched import SpreadBatch


@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("n_agents", [3, 4])
def test_spread_core_equals_mpe2(continuous, n_agents):
    B, seed = 3, 11
    core = SpreadBatch(B, seed=seed, N=n_agents, continuous_actions=continuous)
    step = core.reset()
    refs = [
        envs.make("mpe/simple_spread-v3", N=n_agents, continuous_actions=continuous)
        for _ in range(B)
    ]
    ref_obs = [r.reset(seed=seed + i)[0] for i, r in enumerate(refs)]
    agents = refs[0].possible_agents
    rng = np.random.default_rng(0)
    for t in range(60):  # 25-step episodes: two resets inside
        for i, ref in enumerate(refs):
            expected = np.stack([ref_obs[i][a] for a in agents])
            np.testing.assert_allclose(
                step.obs["agent"][i], expected, atol=1e-5, err_msg=f"t={t} env={i}"
            )
            np.testing.assert_allclose(step.state[i], ref.state(), atol=1e-5)
        if continuous:
            actions = rng.random((B, n_agents, 5)).astype(np.float32)
        else:
            actions = rng.integers(0, 5, (B, n_agents))
        step = core.step({"agent": actions})
        for i, ref in enumerate(refs):
            obs, rew, term, trunc, _ = ref.step({a: actions[i, j] for j, a in enumerate(agents)})
            np.testing.assert_allclose(step.rewards[i], [rew[a] for a in agents], atol=1e-5)
            assert step.truncated[i] == all(trunc.values())
            assert step.terminated[i] == all(term.values())
            if step.truncated[i]:
                final = np.stack([obs[a] for a in agents])
                np.testing.assert_allclose(step.final_obs["agent"][i], final, atol=1e-5)
                obs, _ = ref.reset()
            ref_obs[i] = obs


def test_core_rejects_arguments_it_does_not_model():
    from envs.vector import Unsupported

    with pytest.raises(Unsupported):
        SpreadBatch(2, curriculum=True)
