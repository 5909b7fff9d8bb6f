"""Arena environments: PettingZoo ParallelEnvs by id (``family/name-vN``)."""

from envs.registry import EnvError, EnvSpec, facts, ids, make, make_vector, register, spec

__all__ = ["EnvError", "EnvSpec", "facts", "ids", "make", "make_vector", "register", "spec"]
