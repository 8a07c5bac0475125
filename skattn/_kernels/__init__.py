"""The attention kernels: pure numpy functions on arrays.

- ``attention``: scaled dot-product attention in query tiles, the plain exact
  tile first, then the tile that folds the softmax shift and the row sums into
  its matrix products; the public :func:`~skattn.scaled_dot_product_attention`.
- ``attention_backward``: its backward pass, recomputing the probabilities
  tile by tile from the kept log-sum-exp.
- ``multi_head``: projections, heads, multi-head self-attention forward and
  backward; the public :func:`~skattn.multi_head_attention`.
- ``dropout``: counter-based dropout masks, the same whatever the tiles.
- ``checks``: the checks of the public kernels' arguments.

Nothing here imports scikit-learn, the model or an estimator; the kernels take
arrays (and tile or chunk sizes) and use only the thread pool of
``skattn._parallel``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause
