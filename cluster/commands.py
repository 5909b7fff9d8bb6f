"""``arena submit``."""

from cluster.submit import add_arguments


def register(sub) -> None:
    s = sub.add_parser("submit", help="run an arena command on a Ray cluster as a Ray job")
    add_arguments(s)
    s.set_defaults(arena_handler="cluster.submit:main")
