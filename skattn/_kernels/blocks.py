"""The blocks of the compiled attention kernels, which ``compiled.py`` and the
numba loops of ``_numba_attention.py`` and ``_numba_short.py`` share: the
block of queries and keys each loop computes at once, and the floor of the
row sums below which a row is computed again."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

# Query rows and keys of one block: ROWS * KEYS float32 scores are 32 KiB,
# an L1 cache; among 16 to 128 rows by 128 to 512 keys, blocks of 32 to 64 KiB
# are the fastest (user guide, "Performance").
ROWS = 32
KEYS = 256

# A row sum of exponentials below this may have lost precision to underflow:
# the row is computed again, shifted by its largest score (the numpy path's
# FOLDED_SUM_FLOOR).
SUM_FLOOR = math.exp(-60.0)
