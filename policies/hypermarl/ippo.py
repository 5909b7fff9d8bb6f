"""``--algo hypermarl-ippo``: HyperMARL on IPPO (see :mod:`policies.hypermarl`)."""

from policies.hypermarl import algorithm

ALGORITHM = algorithm("hypermarl-ippo", centralised_critic=False)
