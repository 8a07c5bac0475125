"""Synthetic sequence-classification data sets that need attention.

In these tasks the label depends on which tokens occur together or in which
order, not on the average token of a sequence. Logistic regression on the
mean-pooled tokens therefore stays near chance, while a model whose tokens can
look at each other (self-attention) can solve them.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_scalar

__all__ = ["make_sequence_classification"]

# Number of marker symbols each task reserves (None: ``n_classes``).
TASKS = {"order": None, "cooccurrence": 2}

# Vocabularies of at most this many symbols (and more symbols than dimensions) are
# spread over the sphere by a few steps of repulsion; the cost is quadratic.
MAX_SPREAD_SYMBOLS = 256
N_SPREAD_ITER = 100


def make_sequence_classification(
    n_samples=200,
    n_tokens=16,
    n_features=8,
    *,
    n_classes=2,
    task="order",
    n_symbols=8,
    min_tokens=None,
    noise=0.1,
    return_symbols=False,
    random_state=None,
):
    """Generate sequences of token embeddings whose label needs attention.

    Each token is the embedding of a symbol from a random vocabulary plus
    Gaussian noise. A few symbols are *markers*; the others are *distractors*
    that fill the remaining positions at random. The label depends only on how
    the markers are arranged:

    - ``task="order"``: every sequence holds each of the ``n_classes`` markers
      exactly once, at random distinct positions; the label is the index of
      the marker that comes first.
    - ``task="cooccurrence"``: two markers A and B are each present (once) or
      absent, independently with probability 1/2; the label is 1 when exactly
      one of them is present (A XOR B), else 0. Binary only.

    Logistic regression on the mean (or max) of the tokens stays near chance on
    both tasks (see Notes), whereas self-attention can solve them: a marker
    token can attend to the other markers and, with a positional encoding, to
    their positions.

    Parameters
    ----------
    n_samples : int, default=200
        Number of sequences.

    n_tokens : int, default=16
        Number of tokens of each sequence, or the longest length when
        ``min_tokens`` is given.

    n_features : int, default=8
        Width of each token embedding.

    n_classes : int, default=2
        Number of classes. For ``task="order"``, also the number of markers in
        each sequence; ``task="cooccurrence"`` needs ``n_classes=2``.

    task : {"order", "cooccurrence"}, default="order"
        Rule that gives the label, as described above.

    n_symbols : int, default=8
        Size of the vocabulary: the markers (``n_classes`` symbols for
        ``"order"``, 2 for ``"cooccurrence"``) followed by the distractors, of
        which there must be at least one.

    min_tokens : int, default=None
        None: every sequence has ``n_tokens`` tokens and ``X`` is a 3D array.
        An int: the length of each sequence is drawn uniformly from
        ``min_tokens`` to ``n_tokens`` (both included) and ``X`` is a list of
        2D arrays. The shortest length must leave room for the markers.

    noise : float, default=0.1
        Standard deviation of the Gaussian noise added to each coordinate of
        each token. The symbol embeddings have unit norm.

    return_symbols : bool, default=False
        If True, also return the symbol of each token and the vocabulary.

    random_state : int, RandomState instance or None, default=None
        Determines the vocabulary, the sequences and the noise. Pass an int for
        reproducible output across multiple function calls.

    Returns
    -------
    X : ndarray of shape (n_samples, n_tokens, n_features) or list of ndarray
        The sequences, float64. With ``min_tokens``, a list of ``n_samples``
        arrays of shape (n_tokens_i, n_features).

    y : ndarray of shape (n_samples,)
        The integer label of each sequence, from 0 to ``n_classes - 1``.

    symbols : ndarray of shape (n_samples, n_tokens) or list of ndarray
        The symbol of each token, an index into ``vocabulary`` (a list of 1D
        arrays with ``min_tokens``). Symbols ``0`` to ``n_classes - 1`` are the
        markers of ``"order"`` (the label is the marker that comes first);
        symbols 0 (A) and 1 (B) are those of ``"cooccurrence"``; the others are
        distractors. Only returned if ``return_symbols=True``.

    vocabulary : ndarray of shape (n_symbols, n_features)
        The embedding of each symbol. Only returned if
        ``return_symbols=True``.

    See Also
    --------
    sklearn.datasets.make_classification : Tabular classification problems.
    skattn.AttentionTransformer : Self-attention over such sequences.

    Notes
    -----
    The vocabulary is chosen so that its symbols are far apart: orthonormal
    vectors in a random basis when ``n_symbols <= n_features``; otherwise unit
    vectors drawn uniformly on the sphere, then pushed apart by a few steps of
    repulsion (for up to 256 symbols); for ``n_features=1``, evenly spaced
    values in [-1, 1] in random order (``2 / (n_symbols - 1)`` apart).
    Decoding each token to its nearest symbol recovers the symbols (hence the
    labels) as long as ``noise`` is small compared with the distances between
    symbols.

    Why mean pooling fails:

    - ``"order"``: every sequence holds the same multiset of markers, and its
      length and distractors are drawn independently of the label, so the mean
      (or max) of its tokens is independent of the label: no model of the
      pooled tokens, linear or not, beats chance. Only the positions of the
      markers tell the classes apart.
    - ``"cooccurrence"``: the expected mean of the tokens is an affine function
      of the presence indicators ``a`` and ``b`` of the two markers (a present
      marker displaces a distractor), so the four cases lie on a parallelogram
      whose diagonals are the two classes: ``a XOR b`` is not linearly
      separable. The number of markers (0 or 2 for class 0, 1 for class 1)
      does not separate them linearly either. Logistic regression on the mean
      stays near chance, and no linear classifier does better than cutting one
      corner off (at most 3/4 right, less with noise). A nonlinear model of the
      mean can solve this task: it needs interactions between tokens, not
      their order.

    Examples
    --------
    >>> from skattn.datasets import make_sequence_classification
    >>> X, y = make_sequence_classification(n_samples=100, random_state=0)
    >>> X.shape, y.shape
    ((100, 16, 8), (100,))
    >>> sorted(set(y.tolist()))
    [0, 1]

    With ``return_symbols=True``, the label rule can be checked: for
    ``"order"``, the label is the marker (symbol 0 or 1) that comes first.

    >>> X, y, symbols, vocabulary = make_sequence_classification(
    ...     n_samples=50, n_tokens=6, return_symbols=True, random_state=0
    ... )
    >>> symbols.shape, vocabulary.shape
    ((50, 6), (8, 8))
    >>> first_marker = [row[row < 2][0] for row in symbols]
    >>> bool((y == first_marker).all())
    True

    Sequences of different lengths come as a list of 2D arrays:

    >>> X, y = make_sequence_classification(
    ...     n_samples=3, n_tokens=10, min_tokens=5, task="cooccurrence",
    ...     random_state=0,
    ... )
    >>> len(X), X[0].shape[1]
    (3, 8)
    >>> all(5 <= len(seq) <= 10 for seq in X)
    True
    """
    n_markers = _check_params(
        n_samples=n_samples,
        n_tokens=n_tokens,
        n_features=n_features,
        n_classes=n_classes,
        task=task,
        n_symbols=n_symbols,
        min_tokens=min_tokens,
        noise=noise,
        return_symbols=return_symbols,
    )
    rng = check_random_state(random_state)
    vocabulary = _make_vocabulary(n_symbols, n_features, rng)

    if min_tokens is None:
        lengths = np.full(n_samples, n_tokens)
    else:
        lengths = rng.randint(min_tokens, n_tokens + 1, size=n_samples)

    # Distinct random positions for the markers, within each sequence: rank
    # random keys, with the padding beyond each length ranked last.
    keys = rng.uniform(size=(n_samples, n_tokens))
    keys[np.arange(n_tokens) >= lengths[:, None]] = 2.0
    positions = np.argsort(keys, axis=1)[:, :n_markers]  # (n_samples, n_markers)

    # Distractors everywhere, then the markers at their positions.
    symbols = rng.randint(n_markers, n_symbols, size=(n_samples, n_tokens))
    rows = np.arange(n_samples)[:, None]
    if task == "order":
        symbols[rows, positions] = np.arange(n_classes)
        # The positions are a random permutation's first slots, so the first
        # marker is uniform over the classes.
        y = np.argmin(positions, axis=1)
    else:  # "cooccurrence"
        present = rng.randint(2, size=(n_samples, 2)).astype(bool)
        sample, marker = np.nonzero(present)
        symbols[sample, positions[sample, marker]] = marker
        y = present[:, 0] ^ present[:, 1]
    y = y.astype(int)

    X = vocabulary[symbols]  # (n_samples, n_tokens, n_features)
    X += noise * rng.standard_normal(X.shape)

    if min_tokens is not None:
        X = [X[i, :length].copy() for i, length in enumerate(lengths)]
        symbols = [symbols[i, :length].copy() for i, length in enumerate(lengths)]

    if return_symbols:
        return X, y, symbols, vocabulary
    return X, y


def _check_params(
    *,
    n_samples,
    n_tokens,
    n_features,
    n_classes,
    task,
    n_symbols,
    min_tokens,
    noise,
    return_symbols,
):
    """Validate the parameters of :func:`make_sequence_classification`.

    Returns
    -------
    n_markers : int
        Number of marker symbols of the task.
    """
    check_scalar(n_samples, "n_samples", Integral, min_val=1)
    check_scalar(n_tokens, "n_tokens", Integral, min_val=1)
    check_scalar(n_features, "n_features", Integral, min_val=1)
    check_scalar(n_classes, "n_classes", Integral, min_val=2)
    check_scalar(n_symbols, "n_symbols", Integral, min_val=1)
    if min_tokens is not None:
        check_scalar(min_tokens, "min_tokens", Integral, min_val=1)
    check_scalar(noise, "noise", Real, min_val=0)
    if not math.isfinite(noise):
        raise ValueError(f"noise must be finite, got noise={noise}.")
    check_scalar(return_symbols, "return_symbols", (bool, np.bool_))
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got task={task!r}.")

    # Checks across parameters.
    if task == "cooccurrence" and n_classes != 2:
        raise ValueError(
            f"task='cooccurrence' is binary and needs n_classes=2, got "
            f"n_classes={n_classes}."
        )
    n_markers = TASKS[task] or n_classes
    if n_symbols <= n_markers:
        raise ValueError(
            f"n_symbols={n_symbols} must be greater than the {n_markers} marker "
            f"symbols of task={task!r} (n_classes={n_classes}), to leave at "
            "least one distractor symbol."
        )
    if min_tokens is not None and min_tokens > n_tokens:
        raise ValueError(
            f"min_tokens={min_tokens} must be at most n_tokens={n_tokens}."
        )
    shortest, name = (
        (n_tokens, "n_tokens") if min_tokens is None else (min_tokens, "min_tokens")
    )
    if shortest < n_markers:
        raise ValueError(
            f"{name}={shortest} leaves no room for the {n_markers} markers of "
            f"task={task!r} (n_classes={n_classes}): every sequence needs at "
            f"least {n_markers} tokens."
        )
    return n_markers


def _make_vocabulary(n_symbols, n_features, rng):
    """Draw ``n_symbols`` well-separated symbol embeddings.

    Parameters
    ----------
    n_symbols : int
        Number of symbols.

    n_features : int
        Width of each embedding.

    rng : RandomState instance
        Source of randomness.

    Returns
    -------
    vocabulary : ndarray of shape (n_symbols, n_features)
        Unit-norm rows (values in [-1, 1] for ``n_features=1``).
    """
    if n_features == 1:
        return rng.permutation(np.linspace(-1.0, 1.0, n_symbols))[:, None]
    if n_symbols <= n_features:
        # Orthonormal rows in a random basis: all pairwise distances sqrt(2).
        q, r = np.linalg.qr(rng.standard_normal((n_features, n_symbols)))
        q *= np.sign(np.diag(r))  # make the basis uniform (Haar) over rotations
        return q.T  # (n_symbols, n_features)
    vocabulary = _normalize(rng.standard_normal((n_symbols, n_features)))
    if n_symbols <= MAX_SPREAD_SYMBOLS:
        vocabulary = _spread(vocabulary)
    return vocabulary


def _spread(vocabulary):
    """Push unit vectors apart on the sphere (Thomson-style repulsion).

    Each step moves every vector along the tangent part of the force
    ``sum_j (v_i - v_j) / |v_i - v_j|**3``, with a step size that shrinks from
    0.2 to 0.01 (relative to the largest force), then renormalises.

    Parameters
    ----------
    vocabulary : ndarray of shape (n_symbols, n_features)
        Unit vectors.

    Returns
    -------
    vocabulary : ndarray of shape (n_symbols, n_features)
        Unit vectors, further apart.
    """
    for step in np.linspace(0.2, 0.01, N_SPREAD_ITER):
        # Squared distances of unit vectors: 2 - 2 cos.
        sq_dist = np.maximum(2.0 - 2.0 * vocabulary @ vocabulary.T, 1e-12)
        np.fill_diagonal(sq_dist, np.inf)  # no force on oneself
        weights = sq_dist**-1.5  # (n_symbols, n_symbols)
        force = vocabulary * weights.sum(axis=1, keepdims=True) - weights @ vocabulary
        # Keep the tangent part only: the radial part is undone by normalising.
        force -= np.sum(force * vocabulary, axis=1, keepdims=True) * vocabulary
        largest = np.linalg.norm(force, axis=1).max()
        if largest == 0:
            break
        vocabulary = _normalize(vocabulary + (step / largest) * force)
    return vocabulary


def _normalize(vectors):
    """Scale each row to unit norm."""
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
