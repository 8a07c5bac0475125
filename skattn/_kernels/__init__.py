"""The attention kernels: numpy functions on arrays, and their compiled twins.

- ``attention``: scaled dot-product attention in query tiles, the plain exact
  tile first, then the tile that folds the softmax shift and the row sums into
  its matrix products.
- ``functional``: the public :func:`~skattn.scaled_dot_product_attention`,
  full or with an attention pattern.
- ``patterns``: the attention patterns as objects (full, banded), the public
  :mod:`skattn.patterns`; each gives the kernels of one call.
- ``attention_backward``: its backward pass, recomputing the probabilities
  tile by tile from the kept log-sum-exp.
- ``multi_head``: projections, heads, multi-head self-attention forward and
  backward; the public :func:`~skattn.multi_head_attention`.
- ``band`` and ``banded``: banded attention (Longformer's sliding window,
  dilated, with a global token): the band's offsets, clipped to the sequence
  where they outnumber its span, and the numpy passes over its columns; the
  forward and backward passes (``compiled_banded`` and ``_numba_banded``
  compile them).
- ``sparse``: the numpy passes of sparse attention over any layout of each
  query's keys (the band's, BigBird's blocks'), a global token included.
- ``block_sparse``: BigBird's block-sparse attention with random blocks, its
  layout and its pattern object.
- ``folded``: the attention tile whose matrix products also compute the
  softmax's shift and row sums.
- ``dropout``: counter-based dropout masks, the same whatever the tiles.
- ``compiled`` (and ``_numba_attention``, ``_numba_short``, ``_numba_banded``,
  ``_numba_exp``, ``_numba_products``, ``_numba_vectors``,
  ``_numba_layer_norm``): the attention's forward and backward passes fused
  and compiled with numba, where it is installed (the ``[fast]`` extra), for
  the cases the model computes, and the model's layer norm; the numpy path is
  the reference, and runs everything else. ``warm_up`` runs each compiled
  kernel once, so that numba compiles and caches it (the test suite's start,
  ``benchmarks/compile_time.py``).
- ``checks``: the checks of the public kernels' arguments; ``blocks``: the
  block sizes the compiled kernels and their numba loops share.

Nothing here imports scikit-learn, the model or an estimator; the kernels take
arrays (and tile or chunk sizes) and use only the thread pool of
``skattn._parallel``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause
