"""The algorithm registry as a whole: every registered algorithm, against one env of every
kind (each algorithm's own example env, continuous actions, several agent groups, text), is
either built (capabilities checked, modules declared once, the RLlib config made) or refused
with one line naming the algorithm or the env, before anything runs. A new algorithm is one
package and one line in ``policies.algorithm.PACKAGES``, and lands in this matrix."""

import pytest

from policies import algorithm
from policies.algorithm import AlgorithmMismatch

KINDS = sorted(
    {algorithm.get(n).example_env for n in algorithm.names()}
    | {"mpe/simple_spread_continuous-v3", "mpe/simple_speaker_listener-v4"}
)


def test_the_registry_lists_every_algorithm_package():
    names = algorithm.names()
    assert {"ippo", "mappo", "iql", "vdn", "qmix", "bc", "grpo", "selfplay"} <= set(names)
    for name in names:
        info = algorithm.get(name)
        assert info.name == name and info.description and info.losses
        assert info.example_env in KINDS


@pytest.mark.parametrize("env_id", KINDS)
@pytest.mark.parametrize("name", algorithm.names())
def test_every_algorithm_builds_or_refuses_every_kind_of_env(name, env_id):
    info = algorithm.get(name)
    settings = info.settings()
    if hasattr(settings.model, "kind"):  # a language model: the tiny one, not SmolLM2
        settings.model.kind = "tiny"
    try:
        config = info.build(env_id, settings)
    except AlgorithmMismatch as e:
        message = str(e)
        assert env_id != info.example_env, f"{name} refuses its own example: {message}"
        assert "\n" not in message and (name in message or env_id in message), message
        return
    declared = info.modules(env_id, settings).rl_module_specs
    assert set(config.rl_module_spec.rl_module_specs) == set(declared)
    for mid, spec in declared.items():  # one declaration: the learner's and eval's agree
        built = config.rl_module_spec.rl_module_specs[mid]
        assert (built.module_class, built.model_config) == (spec.module_class, spec.model_config)
