"""The policy server's request pre-check without a server: the linear JSON scan (depth and
booleans outside strings, escapes included) and the strict reading of a body (UTF-8 only,
bounded integers and nesting)."""

import json
import random
import time

import pytest

from serve.policy import MAX_DEPTH, MAX_INT_DIGITS, RequestError, read_json, scan_json


def walk(value, depth=0):
    """(depth, booleans) of a parsed value, the reference the scan must agree with."""
    if isinstance(value, bool):
        return depth, 1
    if isinstance(value, list | dict):
        items = list(value.values()) if isinstance(value, dict) else value
        results = [walk(v, depth + 1) for v in items]
        return max([depth + 1] + [d for d, _ in results]), sum(b for _, b in results)
    return depth, 0


@pytest.mark.parametrize(
    ("body", "depth", "booleans"),
    [
        (b"", 0, 0),
        (b"1", 0, 0),
        (b"true", 0, 1),
        (b'"[[[{{{ true false"', 0, 0),
        (b'{"a": "[[[", "b": [1]}', 2, 0),
        # escaped quotes do not end a string: the brackets after them are text
        (rb'{"a": "x\"]]]\"[[[", "b": true}', 1, 1),
        # an escaped backslash does: the string is `a\`, then an array follows
        (rb'["a\\", [true]]', 2, 1),
        (rb'["a\\\\", [[false]]]', 3, 1),
        # three backslashes: an escaped backslash and an escaped quote, still inside
        (rb'["a\\\"[[", true]', 1, 1),
        (rb'["\\\\\"", {"k": [true, false]}]', 3, 2),
        (rb'["\u005b\u0022", [[]]]', 3, 0),  # \u escapes stay text
        (b'{"true": "false", "x": ["falsetrue"]}', 2, 0),
        ('{"名前": "[é]", "ü": [[true]]}'.encode(), 3, 1),
        (b"[" * 10_000 + b"]" * 10_000, 10_000, 0),
        (b"[]" * 1000, 1, 0),
        (b"}}}]]][", 0, 0),  # closers first (the parser stops at the first one)
        # unterminated strings: all that follows is inside one
        (b'[["abc', 2, 0),
        (b'"' + b'\\"' * 1000, 0, 0),
        (b'["' + b"\\" * 999 + b'", [true]]', 1, 0),  # odd run: the quote is escaped
        (b'["' + b"\\" * 1000 + b'", [true]]', 2, 1),  # even run: it ends the string
    ],
)
def test_scan_counts_depth_and_booleans_outside_strings(body, depth, booleans):
    scan = scan_json(body)
    assert (scan.depth, scan.booleans) == (depth, booleans)


def random_value(rng: random.Random, depth: int):
    text = "".join(rng.choice('ab"\\[]{}/ \n\ttruefalse\u00e9\u4e2d\U0001f600') for _ in range(6))
    kind = rng.randrange(8 if depth < 5 else 4)
    if kind == 0:
        return text
    if kind == 1:
        return rng.choice([True, False, None])
    if kind == 2:
        return rng.uniform(-1e6, 1e6)
    if kind == 3:
        return rng.randrange(-(10**12), 10**12)
    if kind in (4, 5):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        random_value(rng, 99) if kind == 6 else text: random_value(rng, depth + 1)
        for _ in range(rng.randrange(4))
    }


def test_scan_agrees_with_the_parser_on_random_documents():
    rng = random.Random(0)
    for i in range(2000):
        value = random_value(rng, 0)
        if isinstance(value, dict):  # keys must be strings
            value = {str(k): v for k, v in value.items()}
        body = json.dumps(value, ensure_ascii=bool(i % 2), indent=None if i % 3 else 1).encode()
        scan = scan_json(body)
        assert (scan.depth, scan.booleans) == walk(json.loads(body)), body


def test_scan_is_linear_on_the_quadratic_body():
    # The old string regex took 7 s on 32 KB of this and grew with the square of the size
    # (1 MiB: hours). Generous bound for a loaded machine.
    for body in (b'"' + b'\\"' * (1 << 19), b'"\\' * (1 << 19), b'"' * (1 << 20)):
        t0 = time.perf_counter()
        assert scan_json(body).depth == 0
        assert time.perf_counter() - t0 < 5


def reason(body: bytes) -> str:
    with pytest.raises(RequestError) as e:
        read_json(body)
    assert e.value.status == 400
    return str(e.value)


DEEP = '{"observations": {"agent_0": ' + "[" * 10_000 + "]" * 10_000 + "}}"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_only_utf8_is_read(encoding):
    # json.loads(bytes) would detect these encodings, where the old depth check saw no
    # brackets. With a BOM they are not UTF-8; without one they are, with NULs between the
    # characters: the scan sees the brackets and the parser refuses the NULs.
    words = reason(DEEP.encode(encoding))
    assert "the body must be UTF-8" in words or "nested 10002 deep" in words, words
    assert "malformed JSON" in reason('{"observations": {}}'.encode(encoding))


def test_utf8_bom_and_invalid_utf8_are_400s():
    assert "BOM" in reason(b"\xef\xbb\xbf{}")
    assert "UTF-8" in reason(b'{"a": "\xff"}')


def test_nesting_and_integers_are_bounded():
    assert f"nested 10002 deep; at most {MAX_DEPTH}" in reason(DEEP.encode())
    assert read_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)[0] == [[[[[[]]]]]]
    big = b'{"observations": {"agent_0": [' + b"7" * 5000 + b"]}}"
    assert f"5000 digits; at most {MAX_INT_DIGITS}" in reason(big)
    assert f"{MAX_INT_DIGITS + 1} digits" in reason(b"[-" + b"1" * (MAX_INT_DIGITS + 1) + b"]")
    assert read_json(b"[-" + b"9" * MAX_INT_DIGITS + b"]")[0] == [-int("9" * MAX_INT_DIGITS)]
    # long floats are no ValueError (they round, to infinity at worst; the policy refuses that)
    assert read_json(b"[" + b"1" * 5000 + b".0]")[0] == [float("inf")]
    assert read_json(b'{"explore": true, "x": [1, 2]}') == ({"explore": True, "x": [1, 2]}, 1)
