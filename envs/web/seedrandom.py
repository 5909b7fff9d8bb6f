"""``Math.random`` as MiniWoB++ pages seed it: David Bau's seedrandom (an RC4 keystream).

MiniWoB++'s ``core.js`` bundles seedrandom 2.4 and the Python side seeds each episode with
``Math.seedrandom(seed)``. The twin draws from this same stream, so a twin page generated for a
seed is the page the browser generates for that seed, draw for draw.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

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
        if self._pos + 16 > len(self._buf):  # >= 14 bytes a draw: p < 2**-48
            self._ensure(16)
        value, self._pos = _double_at(self._buf, self._pos)
        return value

    # MiniWoB++'s core.js helpers, in the same draw order.
    def randi(self, lo: int, hi: int) -> int:
        return math.floor(self.random() * (hi - lo) + lo)

    def randf(self, lo: float, hi: float) -> float:
        return self.random() * (hi - lo) + lo

    def sample(self, items):
        return items[self.randi(0, len(items))]

    def shuffle(self, items: list) -> list:
        """In place, as ``core.shuffle`` (Fisher-Yates from the end)."""
        picks = self._picks(len(items)).tolist()
        for i in range(len(items) - 1, -1, -1):  # from the last slot down
            k = picks[i]
            items[i], items[k] = items[k], items[i]
        return items

    def shuffled_head(self, items: list, m: int) -> list:
        """The first ``m`` of ``core.shuffle(items)``, drawing all the page draws (the page
        shuffles 4,945 names to show 3 to 9) without making the other swaps.

        Step i swaps slots i and k_i <= i, steps running from the last slot down, and slot i is
        never touched after its step. So slot i ends with what slot k_i held before step i, and a
        slot p held, before step t, the item of the last step t' > t that swapped into it (the
        smallest such t'), as it stood before step t': a short chain back to an untouched slot.
        """
        picks = self._picks(len(items))
        steps = np.arange(len(picks))
        first_into = np.full(len(picks), len(picks))  # the smallest t' > p with k_t' = p
        moved = picks != steps
        np.minimum.at(first_into, picks[moved], steps[moved])
        first_into = first_into.tolist()
        into_head = {}  # slot p < m: the steps that swapped into it, ascending
        for t in np.flatnonzero(picks < m).tolist():
            into_head.setdefault(int(picks[t]), []).append(t)

        def before_own_step(slot: int):
            while first_into[slot] < len(items):
                slot = first_into[slot]
            return items[slot]

        head = []
        for i in range(min(m, len(items))):
            k = int(picks[i])
            if k == i:
                head.append(before_own_step(i))
                continue
            later = [t for t in into_head.get(k, ()) if t > i]
            head.append(before_own_step(later[0]) if later else items[k])
        return head

    def _picks(self, n: int) -> np.ndarray:
        """``core.shuffle``'s swap partner k_i of each slot i, ``floor(random() * (i + 1))``,
        drawn from the last slot down."""
        draws = self.draws(n) if n < 32 else self._draw_array(n)
        return np.floor(np.asarray(draws)[::-1] * np.arange(1, n + 1)).astype(np.int64)

    def draws(self, count: int) -> list[float]:
        """``count`` numbers of the stream."""
        if count >= 32:
            return self._draw_array(count).tolist()
        self._ensure(16 * count)  # >= 14 bytes a draw: p < 2**-48
        out = []
        for _ in range(count):
            value, self._pos = _double_at(self._buf, self._pos)
            out.append(value)
        return out

    def _ensure(self, size: int) -> None:
        if self._pos + size > len(self._buf):
            self._buf = self._buf[self._pos :] + self._rc4.encrypt(bytes(size + self.CHUNK))
            self._pos = 0

    def _draw_array(self, count: int) -> np.ndarray:
        """Many draws with NumPy. A draw of L bytes with bits v is exactly
        ``(v >> h) / 2**(8L - h)``, h bringing v under 2**53; L is 7, or 8 when the first byte
        is under 16 (1 in 16), and the 1 in 4,096 longer draws take the scalar loop."""
        size = 7 * count + count // 8 + 64  # 7 + 1/16 bytes a draw on average
        while True:
            self._ensure(size + 16)
            if (made := _draw_lengths(self._buf, self._pos, count, size)) is not None:
                break
            size *= 2
        starts, lengths, scalar = made
        window = np.frombuffer(self._buf, np.uint8, size, self._pos)
        words = as_strided(window, (size - 7, 8), (1, 1)).view(">u8")[starts, 0]
        bits = words >> (8 * (8 - np.minimum(lengths, 8))).astype(np.uint64)
        bit_length = np.frexp((bits >> np.uint64(11)).astype(np.float64))[1] + 11  # exact
        h = np.maximum(bit_length - 53, 0)
        out = np.ldexp((bits >> h.astype(np.uint64)).astype(np.float64), h - 8 * lengths)
        for index, value in scalar:
            out[index] = value
        self._pos += int(starts[-1] + lengths[-1])
        return out


def _double_at(buf: bytes, pos: int) -> tuple[float, int]:
    """seedrandom's double at byte ``pos``: 6 bytes over 2**48, one more byte while the
    numerator is under 2**52, halved back under 2**53. Its value and where it ends."""
    v = int.from_bytes(buf[pos : pos + 7], "big")
    if v >= 1 << 52:  # 7 bytes (15 in 16 draws): exactly (v >> h) / 2**(56 - h)
        h = max(v.bit_length() - 53, 0)
        return math.ldexp(v >> h, h - 56), pos + 7
    n, d, x = float(int.from_bytes(buf[pos : pos + 6], "big")), _START_DENOM, 0
    pos += 6
    while n < _SIGNIFICANCE:
        n = (n + x) * _WIDTH
        d *= _WIDTH
        x = buf[pos]
        pos += 1
    while n >= _OVERFLOW:
        n /= 2
        d /= 2
        x >>= 1
    return (n + x) / d, pos


def _draw_lengths(buf: bytes, offset: int, count: int, size: int):
    """Where ``count`` draws start (from ``offset``), their lengths in bytes, and the values of
    those longer than 8 bytes; ``None`` if they would need more than ``size`` bytes.

    Only a draw whose first byte is under 16 is longer than 7 bytes, so the starts step by 7
    from the end of one such draw to the next such byte in the same residue mod 7: one bisect
    per long draw, in the long bytes' offsets sorted by residue (``size`` apart) then offset.
    """
    window = np.frombuffer(buf, np.uint8, size, offset)
    longs = np.flatnonzero(window < 16)
    keys = np.sort(longs % 7 * size + longs).tolist()
    lengths = np.full(count, 7, np.int64)
    scalar, index, pos = [], 0, 0
    while True:
        base = pos % 7 * size
        at = bisect.bisect_left(keys, base + pos)
        if at == len(keys) or keys[at] >= base + size:
            break
        q = keys[at] - base
        index += (q - pos) // 7
        if index >= count:
            break
        if buf[offset + q] or buf[offset + q + 1] >= 16:
            lengths[index], pos = 8, q + 8
        else:
            value, end = _double_at(buf, offset + q)
            lengths[index], pos = end - offset - q, end - offset
            scalar.append((index, value))
        index += 1
    starts = np.zeros(count, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return (starts, lengths, scalar) if starts[-1] + lengths[-1] + 16 <= size else None
