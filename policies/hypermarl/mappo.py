"""``--algo hypermarl-mappo``: HyperMARL on MAPPO (see :mod:`policies.hypermarl`)."""

from policies.hypermarl import algorithm

ALGORITHM = algorithm("hypermarl-mappo", centralised_critic=True)
