"""The gated feed-forward sublayer SwiGLU (Shazeer, 2020, as in LLaMA).

``(silu(x W1) * (x W3)) W2``: the hidden layer of ``ff_dim`` units is the
product of a SiLU gate and a linear branch, with no biases. Registered as
``feed_forward="swiglu"`` in ``options.py``.

Shape legend: N samples, T tokens, E model width, F feed-forward width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from scipy.special import expit

from .._kernels.multi_head import project
from .encoder import drop_hidden
from .units import ParamSpec, Unit


class SwiGLUFeedForward(Unit):
    """``linear2(dropout(silu(linear1(x)) * linear3(x)))``, without biases.

    ``silu(a) = a * sigmoid(a)``. The dropout of the hidden layer is in
    :class:`~skattn._model.encoder.FeedForward`'s place. ``activation`` is
    not used: the gate is the SiLU.

    Parameters
    ----------
    d_model, ff_dim : int
        The model's width and the hidden layer's.
    activation : Activation
        Not used (the registry builds every feed-forward kind alike).
    layer : int
        Place of the layer (its dropout site).
    """

    def __init__(self, d_model, ff_dim, activation, layer):
        self.d_model, self.ff_dim, self.layer = d_model, ff_dim, layer

    def param_specs(self):
        d_model, ff_dim = self.d_model, self.ff_dim
        return {
            "linear1": ParamSpec((d_model, ff_dim), "glorot", penalized=True),
            "linear3": ParamSpec((d_model, ff_dim), "glorot", penalized=True),
            "linear2": ParamSpec((ff_dim, d_model), "glorot", penalized=True),
        }

    def forward(self, params, x, context):
        gate_pre = project(x, params["linear1"])  # (N, T, F)
        up = project(x, params["linear3"])  # (N, T, F)
        sigmoid = expit(gate_pre)
        hidden = gate_pre * sigmoid * up  # (N, T, F)
        scale = drop_hidden(hidden, context, self.layer)
        out = project(hidden, params["linear2"])  # (N, T, E)
        return out, (x, gate_pre, up, hidden, scale)

    def backward(self, params, d_out, cache):
        x, gate_pre, up, hidden, scale = cache
        d_flat = d_out.reshape(-1, self.d_model)  # (N*T, E)
        grads = {"linear2": hidden.reshape(-1, self.ff_dim).T @ d_flat}
        d_hidden = project(d_out, params["linear2"].T)  # (N, T, F)
        if scale is not None:
            d_hidden *= scale
        sigmoid = expit(gate_pre)
        silu = gate_pre * sigmoid
        d_up = d_hidden * silu  # (N, T, F)
        # d silu(a) / da = sigmoid(a) * (1 + a * (1 - sigmoid(a)))
        d_gate = d_hidden * up * (sigmoid * (1 + gate_pre * (1 - sigmoid)))
        x_flat = x.reshape(-1, self.d_model)  # (N*T, E)
        grads["linear1"] = x_flat.T @ d_gate.reshape(-1, self.ff_dim)
        grads["linear3"] = x_flat.T @ d_up.reshape(-1, self.ff_dim)
        d_x = project(d_gate, params["linear1"].T)
        d_x += project(d_up, params["linear3"].T)
        return d_x, grads  # (N, T, E)

    def kept_floats(self):
        """Numbers per token kept for the backward pass: the gate's
        pre-activation, the linear branch and the hidden layer."""
        return 3 * self.ff_dim
