"""Arena environments: PettingZoo ParallelEnvs by id (``family/name-vN``)."""

from envs.registry import EnvError, EnvSpec, ids, make, make_vector, register, spec

__all__ = ["EnvError", "EnvSpec", "ids", "make", "make_vector", "register", "spec"]
