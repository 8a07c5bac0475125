"""The encoder stack against ``torch.nn.TransformerEncoder`` with the same weights.

torch is a test-only dependency (the ``test`` extra): these tests are skipped
when it is absent, and skattn never imports it.

Both sides compute in float64 and sum in other orders. The largest difference
measured over every case below is 3.4e-15 (on tokens of |x| <= 4; AMD EPYC,
torch 2.13 CPU, numpy and compiled kernels alike): ``TOLERANCE`` leaves a
margin of about 300 times, for other BLAS kernels.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skattn import AttentionTransformer
from skattn._model.options import REGISTRIES
from skattn._model.units import sinusoidal_positions

torch = pytest.importorskip("torch")

D_MODEL, N_HEADS, FF_DIM, N_LAYERS = 8, 2, 12, 2
TOLERANCE = dict(rtol=1e-12, atol=1e-12)
LENGTHS = (5, 2, 7, 4)


def random_layers(rng, n_layers, d_model, ff_dim):
    """Every weight of every layer, biases and norms included, away from their
    initial values (so that a swapped or ignored weight shows)."""
    layers = []
    for _ in range(n_layers):
        layer = {
            name: rng.standard_normal((d_model, d_model)) / np.sqrt(d_model)
            for name in ("query", "key", "value", "output")
        }
        layer["linear1"] = rng.standard_normal((d_model, ff_dim)) / np.sqrt(d_model)
        layer["linear1_bias"] = 0.3 * rng.standard_normal(ff_dim)
        layer["linear2"] = rng.standard_normal((ff_dim, d_model)) / np.sqrt(ff_dim)
        for name in ("linear2_bias", "norm1_bias", "norm2_bias"):
            layer[name] = 0.3 * rng.standard_normal(d_model)
        for name in ("norm1_weight", "norm2_weight"):
            layer[name] = 1.0 + 0.3 * rng.standard_normal(d_model)
        layers.append(layer)
    return layers


def torch_encoder(est, *, activation, norm_first):
    """``torch.nn.TransformerEncoder`` holding the estimator's fitted weights."""
    layer = torch.nn.TransformerEncoderLayer(
        est.d_model_,
        est.n_heads,
        dim_feedforward=est.ff_dim,
        dropout=est.dropout,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    )
    final_norm = None
    if norm_first:
        final_norm = torch.nn.LayerNorm(est.d_model_, dtype=torch.float64)
    encoder = torch.nn.TransformerEncoder(
        layer, est.n_layers, norm=final_norm, enable_nested_tensor=False
    )

    def put(parameter, value):
        parameter.data.copy_(torch.from_numpy(np.ascontiguousarray(value)))

    for module, weights in zip(encoder.layers, est.layers_, strict=True):
        attention = module.self_attn
        # torch multiplies x @ W.T: its matrices are the transposes of ours
        put(
            attention.in_proj_weight,
            np.concatenate([weights[name].T for name in ("query", "key", "value")]),
        )
        put(attention.in_proj_bias, np.zeros(3 * est.d_model_))
        put(attention.out_proj.weight, weights["output"].T)
        put(attention.out_proj.bias, np.zeros(est.d_model_))
        put(module.linear1.weight, weights["linear1"].T)
        put(module.linear1.bias, weights["linear1_bias"])
        put(module.linear2.weight, weights["linear2"].T)
        put(module.linear2.bias, weights["linear2_bias"])
        for norm in ("norm1", "norm2"):
            put(getattr(module, norm).weight, weights[f"{norm}_weight"])
            put(getattr(module, norm).bias, weights[f"{norm}_bias"])
    if norm_first:
        put(final_norm.weight, est.final_norm_weight_)
        put(final_norm.bias, est.final_norm_bias_)
    return encoder.eval()


def torch_tokens(encoder, h, lengths, causal):
    """Run the encoder on a padded batch ``h`` (N, T, E); padding masked."""
    n_tokens = h.shape[1]
    padding = torch.from_numpy(np.arange(n_tokens) >= np.asarray(lengths)[:, None])
    mask = None
    if causal:
        mask = torch.triu(torch.ones(n_tokens, n_tokens, dtype=torch.bool), 1)
    with torch.no_grad():
        out = encoder(
            torch.from_numpy(h),
            mask=mask,
            src_key_padding_mask=padding,
            is_causal=causal,
        )
    return out.numpy()


def padded(sequences, width):
    batch = np.zeros((len(sequences), max(map(len, sequences)), width))
    for row, seq in zip(batch, sequences, strict=True):
        row[: len(seq)] = seq
    return batch


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", REGISTRIES["activation"].names())
@pytest.mark.parametrize("causal", [False, True])
def test_encoder_stack_equals_torch(norm_first, activation, causal):
    """A 2-layer stack with feed-forward sublayers on a padded ragged batch:
    tokens enter as they are (no projection, no positions)."""
    rng = np.random.default_rng(0)
    X = [rng.standard_normal((n, D_MODEL)) for n in LENGTHS]
    est = AttentionTransformer(
        n_heads=N_HEADS,
        n_layers=N_LAYERS,
        ff_dim=FF_DIM,
        activation=activation,
        layer_norm="pre" if norm_first else "post",
        causal=causal,
        dropout=0.1,  # training only: the outputs are those of eval mode
        positional_encoding=None,
        scale_tokens=False,  # torch reads the raw tokens
        patch_size=None,
        objective=None,
        init={"layers": random_layers(rng, N_LAYERS, D_MODEL, FF_DIM)},
        random_state=0,
    ).fit(X)
    assert est.input_weights_ is None
    if norm_first:  # not the identity, so that it counts
        est.final_norm_weight_ = 1.0 + 0.3 * rng.standard_normal(D_MODEL)
        est.final_norm_bias_ = 0.3 * rng.standard_normal(D_MODEL)
    encoder = torch_encoder(est, activation=activation, norm_first=norm_first)
    expected = torch_tokens(encoder, padded(X, D_MODEL), LENGTHS, causal)
    tokens = est.transform_sequences(X)
    for row, (out, n) in enumerate(zip(tokens, LENGTHS, strict=True)):
        assert out.shape == (n, D_MODEL)
        assert_allclose(out, expected[row, :n], **TOLERANCE)


@pytest.mark.parametrize("norm_first", [False, True])
def test_trained_stack_with_projection_and_positions_equals_torch(norm_first):
    """After training (dropout on, every weight moved), the projected tokens plus
    sinusoidal positions through torch's encoder give the same tokens."""
    rng = np.random.default_rng(1)
    X = [rng.standard_normal((n, 3)) for n in (6, 3, 5, 6, 2, 4)] * 5
    y = np.arange(len(X)) % 2
    est = AttentionTransformer(
        n_heads=N_HEADS,
        head_dim=4,
        n_layers=N_LAYERS,
        ff_dim=FF_DIM,
        activation="gelu",
        layer_norm="pre" if norm_first else "post",
        dropout=0.2,
        scale_tokens=False,  # torch reads the raw tokens
        patch_size=None,
        max_iter=3,
        random_state=0,
    ).fit(X, y)
    assert est.input_weights_.shape == (3, 8)
    h = [x @ est.input_weights_ + sinusoidal_positions(len(x), 8) for x in X]
    lengths = [len(x) for x in X]
    encoder = torch_encoder(est, activation="gelu", norm_first=norm_first)
    expected = torch_tokens(encoder, padded(h, 8), lengths, causal=False)
    for row, out in enumerate(est.transform_sequences(X)):
        assert_allclose(out, expected[row, : lengths[row]], **TOLERANCE)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_swiglu_equals_its_torch_formula_forward_and_backward(dtype):
    """The gated feed-forward against ``F.linear(F.silu(x W1) * x W3, W2)`` in
    torch, its gradients by torch's autograd (torch has no SwiGLU module)."""
    from skattn._model.swiglu import SwiGLUFeedForward
    from skattn._model.units import Context

    rng = np.random.default_rng(0)
    unit = SwiGLUFeedForward(D_MODEL, FF_DIM, None, layer=0)
    params = {
        name: (rng.standard_normal(spec.shape) / np.sqrt(spec.shape[0])).astype(dtype)
        for name, spec in unit.param_specs().items()
    }
    x = (2 * rng.standard_normal((3, 5, D_MODEL))).astype(dtype)
    d_out = rng.standard_normal((3, 5, D_MODEL)).astype(dtype)
    out, cache = unit.forward(params, x, Context(np.array([5, 5, 5]), causal=False))
    d_x, grads = unit.backward(params, d_out, cache)

    F = torch.nn.functional
    tensors = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    x_t = torch.tensor(x, requires_grad=True)
    gate = F.silu(x_t @ tensors["linear1"])
    out_t = (gate * (x_t @ tensors["linear3"])) @ tensors["linear2"]
    out_t.backward(torch.tensor(d_out))
    tolerance = TOLERANCE if dtype == np.float64 else dict(rtol=2e-5, atol=2e-5)
    assert out.dtype == dtype and d_x.dtype == dtype
    assert_allclose(out, out_t.detach().numpy(), **tolerance)
    assert_allclose(d_x, x_t.grad.numpy(), **tolerance)
    for name, tensor in tensors.items():
        assert_allclose(grads[name], tensor.grad.numpy(), **tolerance, err_msg=name)
