import numpy as np

import envs
from envs.vector import ParallelEnvBatch


def test_parallel_env_batch_steps_resets_and_reports_final_obs():
    vec = envs.make_vector("mpe/simple-v3", 3, seed=5, max_cycles=4)
    assert isinstance(vec, ParallelEnvBatch)
    step = vec.reset()
    assert step.obs["agent"].shape == (3, 1, 4) and step.state.shape == (3, 4)
    ref = envs.make("mpe/simple-v3", max_cycles=4)
    ref_obs, _ = ref.reset(seed=6)
    np.testing.assert_allclose(step.obs["agent"][1, 0], ref_obs["agent_0"])
    for _t in range(4):
        step = vec.step({"agent": np.zeros((3, 1), np.int64)})
        ref_obs, rew, _, trunc, _ = ref.step({"agent_0": 0})
        np.testing.assert_allclose(step.rewards[1, 0], rew["agent_0"], rtol=1e-6)
    assert step.truncated.all() and not step.terminated.any()
    np.testing.assert_allclose(step.final_obs["agent"][1, 0], ref_obs["agent_0"])


def test_masked_env_batch_carries_masks():
    vec = envs.make_vector("test/masked_grid-v0", 2, seed=0)
    assert vec.groups["a"].has_action_mask
    step = vec.reset()
    assert step.action_mask["a"].shape == (2, 2, 3)
    assert (step.action_mask["a"][..., 0] == 1).all()
