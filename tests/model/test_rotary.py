"""Rotary positions: the rotation against a loop written out, scores that
depend on the distance of the tokens only, the whole layer's gradients
against finite differences, and an estimator fitted with them."""

import math

import numpy as np
import pytest
from helpers import check_unit, ragged_batch, seeded_params
from numpy.testing import assert_allclose

from skattn import AttentionTransformer
from skattn._model.encoder import GELU, PRE_NORM, EncoderLayer, SelfAttention
from skattn._model.model import ModelConfig, build_model
from skattn._model.options import POSITIONAL_ENCODINGS
from skattn._model.rotary import RotaryPositions, Rotation
from skattn._model.units import Context


def rotate_by_loop(a):
    """The rotation of (H, T, Dh) heads, pair by pair: feature m with feature
    m + Dh/2, by the angle t * 10000**(-2m / Dh)."""
    out = np.empty_like(a)
    n_heads, n_tokens, head_dim = a.shape
    half = head_dim // 2
    for h in range(n_heads):
        for t in range(n_tokens):
            for m in range(half):
                angle = t * 10000.0 ** (-2.0 * m / head_dim)
                c, s = math.cos(angle), math.sin(angle)
                x, y = a[h, t, m], a[h, t, m + half]
                out[h, t, m] = x * c - y * s
                out[h, t, m + half] = y * c + x * s
    return out


def test_the_rotation_equals_a_loop_written_out():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 2, 3, 5, 6))  # (N, H, T, Dh) each
    q_rot, k_rot, _ = Rotation().forward(q, k)
    for i in range(2):
        assert_allclose(q_rot[i], rotate_by_loop(q[i]), rtol=1e-14, atol=1e-15)
        assert_allclose(k_rot[i], rotate_by_loop(k[i]), rtol=1e-14, atol=1e-15)


def test_the_rotation_by_hand():
    # Dh = 4: pairs (0, 2) at frequency 1 and (1, 3) at frequency 1/100;
    # position 0 keeps the vector, position 1 turns (1, 0) by 1 radian
    a = np.zeros((1, 2, 4))
    a[0, :, 0] = 1.0
    a[0, :, 1] = 1.0
    rotated, _, _ = Rotation().forward(a, a)
    assert_allclose(rotated[0, 0], [1, 1, 0, 0])
    assert_allclose(
        rotated[0, 1], [math.cos(1), math.cos(0.01), math.sin(1), math.sin(0.01)]
    )


def test_the_rotation_keeps_norms_and_its_backward_is_its_transpose():
    rng = np.random.default_rng(1)
    q, k, d_q, d_k = rng.standard_normal((4, 2, 7, 8))
    rotation = Rotation()
    q_rot, k_rot, cache = rotation.forward(q, k)
    assert_allclose(np.linalg.norm(q_rot, axis=-1), np.linalg.norm(q, axis=-1))
    back_q, back_k = rotation.backward(d_q, d_k, cache)
    # <R q, d> = <q, R^T d>
    assert_allclose(np.sum(q_rot * d_q), np.sum(q * back_q), rtol=1e-12)
    assert_allclose(np.sum(k_rot * d_k), np.sum(k * back_k), rtol=1e-12)


def test_scores_of_identical_tokens_depend_on_their_distance_only():
    # x_i = x for every i: q_i . k_j is a function of i - j, and not constant
    rng = np.random.default_rng(2)
    n_tokens = 6
    x = np.tile(rng.standard_normal(8), (1, n_tokens, 1))  # (1, T, E)
    unit = SelfAttention(8, 2, layer=0, query_key=Rotation())
    params = seeded_params(unit, rng)
    _, (_, cache, *_) = unit.forward(
        params, x, Context(np.array([n_tokens]), causal=False)
    )
    scores = cache["q"][0] @ np.swapaxes(cache["k"][0], -1, -2)  # (H, T, T)
    for distance in range(-n_tokens + 1, n_tokens):
        diagonal = np.diagonal(scores, offset=distance, axis1=1, axis2=2)
        assert_allclose(diagonal, diagonal[:, :1] * np.ones_like(diagonal), rtol=1e-12)
    assert np.ptp(scores) > 0.1


@pytest.mark.parametrize("causal", [False, True])
def test_encoder_layer_with_rotary_positions_backward(causal):
    # the whole layer: input and every weight against finite differences
    rng = np.random.default_rng(3)
    x, lengths = ragged_batch(rng, [4, 2, 3], 4)
    unit = EncoderLayer(
        0,
        4,
        n_heads=2,
        ff_dim=5,
        activation=GELU,
        residual=True,
        layer_norm=PRE_NORM,
        query_key=RotaryPositions(4, 4, 2).query_key_transform(),
    )
    check_unit(unit, seeded_params(unit, rng), x, lengths, rng, causal=causal)


def test_rotary_model_adds_nothing_to_the_tokens_and_rotates_every_layer():
    config = ModelConfig(
        n_features=3, d_model=4, n_heads=2, n_layers=2, positional_encoding="rotary"
    )
    model = build_model(config)
    positions = [unit for _, unit in model.units if isinstance(unit, RotaryPositions)]
    assert len(positions) == 1 and not positions[0].param_specs()
    x = np.ones((1, 3, 4))
    assert positions[0].forward({}, x, None)[0] is x
    layers = [unit for prefix, unit in model.units if prefix.startswith("layers.")]
    assert all(
        isinstance(layer.sublayers[0].inner.query_key, Rotation) for layer in layers
    )
    assert "rotary" in POSITIONAL_ENCODINGS.names()


def test_odd_head_widths_are_refused():
    with pytest.raises(ValueError, match="head_dim must be even, got head_dim=3"):
        RotaryPositions(5, 6, 2)
    X = np.random.default_rng(0).standard_normal((6, 4, 2))
    est = AttentionTransformer(n_heads=2, head_dim=3, positional_encoding="rotary")
    with pytest.raises(ValueError, match="positional_encoding='rotary'"):
        est.fit(X)


def test_rotary_transformer_sees_the_order_of_the_tokens():
    # without positions a reversed sequence pools to the same vector; rotary
    # positions tell them apart, padding still changes nothing
    rng = np.random.default_rng(4)
    X = rng.standard_normal((8, 5, 3))
    reversed_X = X[:, ::-1]
    outputs = {}
    for kind in ("rotary", None):
        est = AttentionTransformer(
            n_heads=2, head_dim=4, positional_encoding=kind, random_state=0
        ).fit(X)
        outputs[kind] = est.transform(X), est.transform(reversed_X)
        ragged = [X[0, :3], X[1]]
        assert_allclose(
            est.transform(ragged)[0], est.transform([X[0, :3]])[0], rtol=1e-12
        )
    assert_allclose(*outputs[None], rtol=1e-12)
    assert np.abs(outputs["rotary"][0] - outputs["rotary"][1]).max() > 1e-3
