"""A module path that pickles of development versions recording no version
name (``skattn._transformer.AttentionTransformer``).

Nothing is importable from it: looking that class up, as unpickling does,
raises :class:`~skattn._persistence.InconsistentVersionError`, which names the
versions and the remedy.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._persistence import refusing_getattr

__getattr__ = refusing_getattr(__name__, ("AttentionTransformer",))
