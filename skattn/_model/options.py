"""The registries of the model's architectural options.

Each :class:`~skattn._model.registry.Registry` below lists the values of one
option of the estimators with what :func:`~skattn._model.model.build_model`
builds for it and the sentence that documents it. A new value is a unit (or
function) and one line here, or for a pooling a subclass of
:class:`~skattn._model.pooling.Pooling` and one line of
:data:`~skattn._model.pooling.POOLINGS`; the parameter constraints, the
documentation of the parameter, the check of a fitted model's structure and
the tests read :data:`REGISTRIES`. The attention patterns are objects, not
names: :data:`ATTENTION_PATTERNS` lists their classes (a new pattern is its
class, with its kernels, and one line there), which the estimators'
constraint, the documentation of ``attention_pattern``, the configuration
(a pattern's name and parameters) and the tests read.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from .._kernels.block_sparse import BigBirdAttention
from .._kernels.patterns import BandedAttention, FullAttention
from .encoder import GELU, POST_NORM, PRE_NORM, RELU, FeedForward
from .patterns import pattern_config
from .pooling import POOLINGS
from .registry import Registry
from .rotary import RotaryPositions
from .swiglu import SwiGLUFeedForward
from .units import LearnedPositions, SinusoidalPositions

POSITIONAL_ENCODINGS = (
    Registry("positional_encoding")
    .add(
        "sinusoidal",
        SinusoidalPositions,
        "Vaswani et al.'s fixed table, added to the tokens;",
    )
    .add(
        "learned",
        LearnedPositions,
        "a learned table (up to fit's longest sequence);",
    )
    .add("rotary", RotaryPositions, "queries and keys rotated (RoFormer);")
    .add(
        None,
        None,
        "none.",
    )
)

ACTIVATIONS = (
    Registry("activation")
    .add("relu", RELU, "``max(a, 0)``;")
    .add("gelu", GELU, "exact, as torch's.")
)

FEED_FORWARDS = (
    Registry("feed_forward")
    .add(
        "mlp",
        FeedForward,
        "``linear2(activation(linear1(x)))``, with biases (torch's);",
    )
    .add(
        "swiglu",
        SwiGLUFeedForward,
        "``linear2(silu(linear1(x)) * linear3(x))``, without biases (Shazeer's "
        "gated SwiGLU, as in LLaMA; ``activation`` is not used).",
    )
)

LAYER_NORMS = (
    Registry("layer_norm")
    .add(
        "post",
        POST_NORM,
        "``norm(x + f(x))`` (torch's ``norm_first=False``);",
    )
    .add(
        "pre",
        PRE_NORM,
        "``x + f(norm(x))``, a final norm (``norm_first=True``);",
    )
    .add(None, None, "none.")
)

# The attention patterns of SelfAttention: classes whose objects the
# estimators take as attention_pattern (a model's configuration holds a
# pattern as its name here and its parameters: _model/patterns.py).
ATTENTION_PATTERNS = (
    Registry("attention_pattern")
    .add(
        "full",
        FullAttention,
        "every token reads every token;",
    )
    .add(
        "banded",
        BandedAttention,
        "a window around each token, dilated (Longformer);",
    )
    .add(
        "bigbird",
        BigBirdAttention,
        "a window of blocks and random blocks (BigBird), linear in the length.",
    )
)


def band_config(window=None, dilation=1):
    """A configuration's description of the band of ``window`` and
    ``dilation``, or of full attention for a window of None."""
    pattern = FullAttention() if window is None else BandedAttention(window, dilation)
    return pattern_config(ATTENTION_PATTERNS, pattern)


# Every registry of an option of ModelConfig, by the option's name.
REGISTRIES = {
    registry.option: registry
    for registry in (
        ACTIVATIONS,
        FEED_FORWARDS,
        LAYER_NORMS,
        POSITIONAL_ENCODINGS,
        POOLINGS,
    )
}
