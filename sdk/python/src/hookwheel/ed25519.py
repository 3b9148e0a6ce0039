"""Ed25519 signature verification (RFC 8032, section 5.1.7), for webhooks signed ``v1a``.

Hand-written because the SDK depends on Python's standard library only, which has SHA-512 but no
elliptic curves, and no package index can be assumed reachable where it is installed. Only
verification is here: a receiver holds public keys, never private ones.

Points are kept in extended homogeneous coordinates (X, Y, Z, T), x = X/Z, y = Y/Z, x*y = T/Z, with
the complete addition and doubling formulas of RFC 8032 section 5.1.4. The check is the cofactorless
one, [S]B = R + [k]A, compared by encoding, as RFC 8032 allows and Go's crypto/ed25519 (which signs
the server's webhooks) does. Nothing here is constant-time: every input of a verification is public.
"""

from __future__ import annotations

import hashlib
from typing import Final

Point = tuple[int, int, int, int]

P: Final = 2**255 - 19
"""The field's prime."""
L: Final = 2**252 + 27742317777372353535851937790883648493
"""The order of the base point's group."""
D: Final = -121665 * pow(121666, -1, P) % P
"""The curve's constant d, in -x^2 + y^2 = 1 + d*x^2*y^2."""
_SQRT_M1: Final = pow(2, (P - 1) // 4, P)
_IDENTITY: Final[Point] = (0, 1, 1, 0)

PUBLIC_KEY_SIZE: Final = 32
SIGNATURE_SIZE: Final = 64


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is the Ed25519 signature of ``message`` under ``public_key`` (RFC 8032 5.1.7).

    False for a key or signature of the wrong size, a key that is not a point's canonical encoding,
    and a signature whose S is not below L (a malleable one).
    """
    if len(public_key) != PUBLIC_KEY_SIZE or len(signature) != SIGNATURE_SIZE:
        return False
    a = decode_point(public_key)
    if a is None:
        return False
    r_encoded = signature[:32]
    s = int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(r_encoded + public_key + message).digest(), "little") % L
    # [S]B - [k]A must be R: computed as one double-scalar multiplication, then encoded, so that an R
    # that is not a canonical encoding of a point can never match.
    return encode_point(_double_scalar_mult(s, BASE, k, _negate(a))) == r_encoded


def is_public_key(public_key: bytes) -> bool:
    """Whether ``public_key`` is 32 bytes encoding a point of the curve, as RFC 8032 5.1.3 decodes them."""
    return len(public_key) == PUBLIC_KEY_SIZE and decode_point(public_key) is not None


def decode_point(encoded: bytes) -> Point | None:
    """The point of a 32-byte encoding (RFC 8032 5.1.3); None when it encodes none, or not canonically."""
    if len(encoded) != 32:
        return None
    n = int.from_bytes(encoded, "little")
    x_sign = n >> 255
    y = n & ((1 << 255) - 1)
    if y >= P:
        return None
    # x^2 = (y^2 - 1) / (d y^2 + 1); its square root is (u/v)^((p+3)/8), computed without an
    # inversion as u v^3 (u v^7)^((p-5)/8), then corrected by sqrt(-1) when it squares to -u/v.
    u = (y * y - 1) % P
    v = (D * y * y + 1) % P
    v3 = v * v % P * v % P
    x = u * v3 % P * pow(u * v3 % P * v3 % P * v % P, (P - 5) // 8, P) % P
    vxx = v * x % P * x % P
    if vxx == u:
        pass
    elif vxx == (-u) % P:
        x = x * _SQRT_M1 % P
    else:
        return None
    if x == 0 and x_sign == 1:
        return None
    if x & 1 != x_sign:
        x = P - x
    return (x, y, 1, x * y % P)


def encode_point(point: Point) -> bytes:
    """The 32-byte encoding of a point: y, little-endian, with the low bit of x in the top bit."""
    x, y, z, _ = point
    z_inv = pow(z, -1, P)
    x = x * z_inv % P
    y = y * z_inv % P
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _add(p: Point, q: Point) -> Point:
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % P
    b = (y1 + x1) * (y2 + x2) % P
    c = 2 * D * t1 * t2 % P
    d = 2 * z1 * z2 % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _double(p: Point) -> Point:
    x1, y1, z1, _ = p
    a = x1 * x1 % P
    b = y1 * y1 % P
    c = 2 * z1 * z1 % P
    h = a + b
    e = h - (x1 + y1) * (x1 + y1)
    g = a - b
    f = c + g
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _negate(p: Point) -> Point:
    x, y, z, t = p
    return (-x % P, y, z, -t % P)


def _double_scalar_mult(s: int, p: Point, k: int, q: Point) -> Point:
    """[s]p + [k]q, reading both scalars' bits together (Straus): one doubling per bit, not two."""
    both = _add(p, q)
    acc = _IDENTITY
    for i in range(max(s.bit_length(), k.bit_length()) - 1, -1, -1):
        acc = _double(acc)
        bits = ((s >> i) & 1, (k >> i) & 1)
        if bits == (1, 1):
            acc = _add(acc, both)
        elif bits == (1, 0):
            acc = _add(acc, p)
        elif bits == (0, 1):
            acc = _add(acc, q)
    return acc


def _base_point() -> Point:
    # B is the point with y = 4/5 and an even x (RFC 8032 5.1): derived here rather than written out.
    point = decode_point((4 * pow(5, -1, P) % P).to_bytes(32, "little"))
    if point is None:  # pragma: no cover - a constant of the curve
        raise AssertionError("the base point does not decode")
    return point


BASE: Final[Point] = _base_point()
"""The base point B."""
