r"""
================================
The textbook example, three ways
================================

Scaled dot-product attention on three tokens, small enough to check by hand:

.. math::

    \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\left(
    \frac{Q K^\top}{\sqrt{d}}\right) V

with :math:`Q = K = [[1, 0], [0, 1], [1, 1]]`, :math:`V = [[1, 2], [3, 4], [5, 6]]`
and :math:`d = 2`. Token 3 is the sum of tokens 1 and 2, so no key scores higher
than it with any query.

We compute it with the functional kernel
:func:`~skattn.scaled_dot_product_attention`, with the bare layer
:func:`~skattn.multi_head_attention`, and with the estimator
:class:`~skattn.AttentionTransformer`; all three give the same numbers.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

# %%
# The functional kernel
# ---------------------
# The scores are :math:`Q K^\top / \sqrt{2}`; each row of the weights is their
# softmax, and the outputs are the weighted averages of the rows of V.
import numpy as np

from skattn import (
    AttentionTransformer,
    multi_head_attention,
    scaled_dot_product_attention,
)

np.set_printoptions(precision=3, suppress=True)

Q = K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
V = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])

output, weights = scaled_dot_product_attention(Q, K, V, return_weights=True)
print("scaled_dot_product_attention")
print("weights (each row sums to 1):")
print(np.round(weights, 3))
print("output:")
print(np.round(output, 3))

# %%
# The bare multi-head layer
# -------------------------
# :func:`~skattn.multi_head_attention` projects the tokens ``x`` itself:
# ``Q = x @ w_query``, ``K = x @ w_key``, ``V = x @ w_value``. With identity
# query and key projections and ``x = Q``, one head computes the same weights.
# No linear map sends ``Q`` to ``V`` (rows 1 and 2 of ``Q`` add up to row 3,
# those of ``V`` do not), so for the outputs we feed one-hot tokens
# ``x = eye(3)``: then ``x @ W`` is ``W``, and the projections are ``Q``, ``K``
# and ``V`` themselves, followed by an identity output projection.
identity = np.eye(2)
_, mha_weights = multi_head_attention(
    Q, identity, identity, identity, n_heads=1, return_weights=True
)
print("\nmulti_head_attention")
print("weights, x = Q with identity projections:")
print(np.round(mha_weights[0], 3))

one_hot = np.eye(3)  # (3 tokens, 3 features)
mha_output, mha_weights = multi_head_attention(
    one_hot, Q, K, V, identity, n_heads=1, return_weights=True
)
print("weights, x = eye(3) with projections Q, K, V:")
print(np.round(mha_weights[0], 3))
print("output:")
print(np.round(mha_output, 3))

# %%
# The estimator
# -------------
# Through :class:`~skattn.AttentionTransformer` the queries, keys and values
# all come from one input ``X``, so we use the one-hot tokens again, as one
# sample of 3 tokens of width 3. The model width ``n_heads * head_dim`` is then
# 3, equal to the token width, so the tokens enter the attention unprojected and
# each ``init`` projection is 3 x 3: the rows we want, plus a zero third column.
# The estimator scales the scores by ``1/sqrt(head_dim) = 1/sqrt(3)``;
# multiplying the query projection by ``sqrt(3/2)`` turns that into the
# textbook ``1/sqrt(2)``.
#
# We switch off what the block adds around the bare layer (token
# standardisation, positional encoding, residual connection, layer norm, the
# feed-forward sublayer); the identity output projection leaves the head's
# output as it is.
X = np.eye(3)[np.newaxis]  # (1 sample, 3 tokens, 3 features)
basis = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
init = {
    "query": np.sqrt(3 / 2) * basis,
    "key": basis,
    "value": np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [5.0, 6.0, 0.0]]),
    "output": np.eye(3),
}
attention = AttentionTransformer(
    n_heads=1,
    head_dim=3,
    init=init,
    scale_tokens=False,
    ff_dim=0,
    positional_encoding=None,
    residual=False,
    layer_norm=None,
).fit(X)
print("\nAttentionTransformer, one-hot tokens")
print("attention weights of the single head:")
print(np.round(attention.attention_weights(X)[0, 0], 3))
print("transform_sequences (the third column of V is zero, so is the output's):")
print(np.round(attention.transform_sequences(X)[0], 3))
