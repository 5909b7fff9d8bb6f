"""``arena serve``."""

from serve.server import add_arguments


def register(sub) -> None:
    r = sub.add_parser("serve", help="deploy runs' policies over HTTP (Ray Serve)")
    add_arguments(r)
    r.set_defaults(arena_handler="serve.server:main")
