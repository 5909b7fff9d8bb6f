"""``Math.random`` as MiniWoB++ pages seed it: David Bau's seedrandom (an RC4 keystream).

MiniWoB++'s ``core.js`` bundles seedrandom 2.4 and the Python side seeds each episode with
``Math.seedrandom(seed)``. The twin draws from this same stream, so a twin page generated for a
seed is the page the browser generates for that seed, draw for draw.
"""

from __future__ import annotations

import math

_WIDTH = 256
_MASK = _WIDTH - 1
_START_DENOM = float(_WIDTH**6)
_SIGNIFICANCE = float(2**52)
_OVERFLOW = float(2**53)


def _int32(x: float) -> int:
    """JavaScript's ToInt32 (NaN -> 0), for the seed mixing's ``^=``."""
    if math.isnan(x) or math.isinf(x):
        return 0
    x = int(x) & 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _mix_key(seed: str) -> list[int]:
    key: list[int | None] = []
    smear = 0
    for j, ch in enumerate(seed):
        slot = _MASK & j
        old = key[slot] if slot < len(key) else None
        smear = _int32(smear) ^ _int32(math.nan if old is None else 19 * old)
        value = _MASK & (smear + ord(ch))
        if slot < len(key):
            key[slot] = value
        else:
            key.append(value)
    return [k for k in key if k is not None]


class JSRandom:
    """A seeded stream equal to the page's ``Math.random()`` after ``Math.seedrandom(seed)``.

    ``seed`` is what the page receives: an int ``s`` is the JavaScript number ``s`` (flattened
    to ``"s\\0"`` by seedrandom), a str is used as is. The keystream is standard RC4 with the
    first 256 bytes dropped (seedrandom's key schedule is RC4's), made in C by pycryptodome:
    the twin's pages draw thousands of numbers per episode.
    """

    CHUNK = 4096

    def __init__(self, seed: int | str):
        from Crypto.Cipher import ARC4

        text = seed if isinstance(seed, str) else f"{int(seed)}\0"
        self._rc4 = ARC4.new(bytes(_mix_key(text) or [0]), drop=_WIDTH)
        self._buf, self._pos = b"", 0

    def random(self) -> float:
        return self.draws(1)[0]

    # MiniWoB++'s core.js helpers, in the same draw order.
    def randi(self, lo: int, hi: int) -> int:
        return math.floor(self.random() * (hi - lo) + lo)

    def randf(self, lo: float, hi: float) -> float:
        return self.random() * (hi - lo) + lo

    def sample(self, items):
        return items[self.randi(0, len(items))]

    def shuffle(self, items: list) -> list:
        """In place, as ``core.shuffle`` (Fisher-Yates from the end)."""
        n = len(items)
        for draw in self.draws(n):
            k = math.floor(draw * n)
            n -= 1
            items[n], items[k] = items[k], items[n]
        return items

    def draws(self, count: int) -> list[float]:
        """``count`` numbers of the stream in one loop (a page shuffles 5,000 names).

        seedrandom's double: 6 bytes scaled by 256 and the 7th as the carry, more bytes while
        under 52 bits of significance, halved back under 53 bits.
        """
        if self._pos + 16 * count > len(self._buf):  # >= 14 bytes a draw: p < 2**-48
            self._buf = self._buf[self._pos :] + self._rc4.encrypt(bytes(16 * count + self.CHUNK))
            self._pos = 0
        buf, pos, out = self._buf, self._pos, []
        for _ in range(count):
            v = int.from_bytes(buf[pos : pos + 7], "big")
            pos += 7
            n, d, x = float(v >> 8) * _WIDTH, _START_DENOM * _WIDTH, v & 255
            while n < _SIGNIFICANCE:
                n = (n + x) * _WIDTH
                d *= _WIDTH
                x = buf[pos]
                pos += 1
            while n >= _OVERFLOW:
                n /= 2
                d /= 2
                x >>= 1
            out.append((n + x) / d)
        self._pos = pos
        return out
