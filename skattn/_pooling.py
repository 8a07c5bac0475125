"""Pooling of per-token outputs into one vector per sequence.

Pure numpy functions. Every pooling reads only the tokens a sequence really has:
``lengths[i]`` gives the number of valid tokens of row ``i`` of a right-padded
batch, so padding never changes the result.

Shape legend: N samples, T tokens (padded length), E model width.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from ._attention import attention_forward


def token_mask(lengths, n_tokens):
    """Boolean mask of the valid tokens, ``mask[i, t] = t < lengths[i]``.

    Returns
    -------
    mask : ndarray of shape (n_samples, n_tokens), dtype bool
    """
    return np.arange(n_tokens) < np.asarray(lengths)[:, None]


def pool_mean(tokens, lengths, params):
    """Mean over the valid tokens: ``(N, T, E) -> (N, E)``."""
    n_tokens = tokens.shape[1]
    if np.all(lengths == n_tokens):
        return tokens.mean(axis=1), {}
    mask = token_mask(lengths, n_tokens)[:, :, None]  # (N, T, 1)
    total = np.where(mask, tokens, 0).sum(axis=1)  # (N, E)
    return total / lengths[:, None].astype(tokens.dtype), {}


def pool_max(tokens, lengths, params):
    """Feature-wise maximum over the valid tokens: ``(N, T, E) -> (N, E)``."""
    n_tokens = tokens.shape[1]
    if np.all(lengths == n_tokens):
        return tokens.max(axis=1), {}
    mask = token_mask(lengths, n_tokens)[:, :, None]  # (N, T, 1)
    return np.where(mask, tokens, -np.inf).max(axis=1), {}


def pool_first(tokens, lengths, params):
    """The first token: ``(N, T, E) -> (N, E)``."""
    return tokens[:, 0].copy(), {}


def pool_last(tokens, lengths, params):
    """The last valid token of each sequence: ``(N, T, E) -> (N, E)``.

    Also the output of the class token, which follows each sequence.
    """
    return tokens[np.arange(tokens.shape[0]), lengths - 1], {}


def pool_attention(tokens, lengths, params):
    """Attention pooling: a learned query attends over the valid tokens.

    ``pooled = softmax(tokens q / sqrt(E)) tokens`` with ``q = params["pool_query"]``
    of shape (E,).
    """
    query = params["pool_query"][None, None, :]  # (1, 1, E)
    mask = token_mask(lengths, tokens.shape[1])[:, None, :]  # (N, 1, T)
    pooled, lse, _ = attention_forward(
        query, tokens, tokens, mask=mask, scale=1.0 / math.sqrt(tokens.shape[-1])
    )  # (N, 1, E)
    return pooled[:, 0], {"lse": lse}


def pool_flatten(tokens, lengths, params):
    """All tokens side by side: ``(N, T, E) -> (N, T * E)``; one fixed length."""
    return tokens.reshape(tokens.shape[0], -1), {}


POOLINGS = {
    "mean": pool_mean,
    "max": pool_max,
    "first": pool_first,
    "last": pool_last,
    "cls": pool_last,  # the class token is appended after the last token
    "attention": pool_attention,
    "flatten": pool_flatten,
}
