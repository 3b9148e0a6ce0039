"""The hand-written Ed25519 verification against RFC 8032's test vectors, and the signatures it must refuse."""

from __future__ import annotations

import time

import pytest

from hookwheel import ed25519
from support import ed25519_public_key, ed25519_sign

# RFC 8032 section 7.1, TEST 1, 2 and 3: secret key (seed), public key, message, signature.
VECTORS: list[tuple[str, str, str, str, str]] = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
        "TEST 1",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        "TEST 2",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
        "TEST 3",
    ),
]
RFC8032 = [pytest.param(*v[:4], id=v[4]) for v in VECTORS]


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_verifies_rfc8032_vectors(seed: str, public: str, message: str, signature: str) -> None:
    assert ed25519.verify(bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature))


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_test_signer_reproduces_rfc8032_vectors(seed: str, public: str, message: str, signature: str) -> None:
    # The webhook tests sign v1a entries with this signer: it must be RFC 8032's, byte for byte.
    assert ed25519_public_key(bytes.fromhex(seed)).hex() == public
    assert ed25519_sign(bytes.fromhex(seed), bytes.fromhex(message)).hex() == signature


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


@pytest.mark.parametrize(("seed", "public", "message", "signature"), RFC8032)
def test_refuses_a_flipped_bit_anywhere_in_the_signature(seed: str, public: str, message: str, signature: str) -> None:
    pk, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    # Every 7th bit of R and of S, the first and the last included: a few ms each.
    for bit in [*range(0, 512, 7), 255, 511]:
        assert not ed25519.verify(pk, msg, flip(sig, bit)), f"bit {bit} flipped"


def test_refuses_a_flipped_bit_in_the_message_or_the_key() -> None:
    _, public, message, signature, _ = VECTORS[1]
    pk, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    for bit in range(8):
        assert not ed25519.verify(pk, flip(msg, bit), sig)
    assert not ed25519.verify(pk, msg + b"\x00", sig)
    assert not ed25519.verify(flip(pk, 3), msg, sig)
    # Another vector's key.
    assert not ed25519.verify(bytes.fromhex(VECTORS[0][1]), msg, sig)


def test_refuses_a_non_canonical_s() -> None:
    """S + L verifies the same equation, so it would be a second signature of the message: refused (5.1.7, 1)."""
    _, public, message, signature, _ = VECTORS[0]
    pk, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    s = int.from_bytes(sig[32:], "little")
    malleated = sig[:32] + (s + ed25519.L).to_bytes(32, "little")
    assert not ed25519.verify(pk, msg, malleated)
    assert not ed25519.verify(pk, msg, sig[:32] + ed25519.L.to_bytes(32, "little"))
    assert not ed25519.verify(pk, msg, sig[:32] + b"\xff" * 32)


def test_refuses_keys_and_signatures_of_the_wrong_size_or_not_on_the_curve() -> None:
    _, public, message, signature, _ = VECTORS[2]
    pk, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    assert not ed25519.verify(pk[:31], msg, sig)
    assert not ed25519.verify(pk + b"\x00", msg, sig)
    assert not ed25519.verify(pk, msg, sig[:63])
    assert not ed25519.verify(pk, msg, sig + b"\x00")
    assert not ed25519.verify(b"", msg, b"")
    # y = p is not canonical (5.1.3, 1), and y = 2 has no x on the curve (5.1.3, 3).
    y_is_p = ed25519.P.to_bytes(32, "little")
    assert ed25519.decode_point(y_is_p) is None
    assert not ed25519.is_public_key(y_is_p)
    assert ed25519.decode_point((2).to_bytes(32, "little")) is None
    # x = 0 with the sign bit set (5.1.3, 4): y = 1 is the identity, whose x is 0.
    assert ed25519.decode_point((1 | 1 << 255).to_bytes(32, "little")) is None
    assert ed25519.decode_point((1).to_bytes(32, "little")) is not None


def test_points_round_trip_through_their_encoding() -> None:
    for public in (v[1] for v in VECTORS):
        encoded = bytes.fromhex(public)
        point = ed25519.decode_point(encoded)
        assert point is not None
        assert ed25519.encode_point(point) == encoded
    assert ed25519.encode_point(ed25519.BASE).hex() == "58" + "66" * 31


def test_verifies_within_a_few_milliseconds() -> None:
    _, public, message, signature, _ = VECTORS[2]
    pk, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    rounds = 20
    start = time.perf_counter()
    for _ in range(rounds):
        assert ed25519.verify(pk, msg, sig)
    per_verify = (time.perf_counter() - start) / rounds
    # A few ms on a quiet machine; the bound leaves room for a loaded one.
    assert per_verify < 0.05, f"{per_verify * 1000:.1f} ms per verification"


def test_agrees_with_the_cryptography_package_where_it_is_installed() -> None:
    crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    for size in (0, 1, 100, 1023):
        key = crypto.Ed25519PrivateKey.generate()
        public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        message = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
        signature = key.sign(message)
        assert ed25519.verify(public, message, signature)
        assert not ed25519.verify(public, message + b"!", signature)
