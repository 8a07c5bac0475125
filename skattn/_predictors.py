"""A module path that pickles of development versions recording no version
name (``skattn._predictors.AttentionClassifier`` and ``AttentionRegressor``).

Those names are stand-in classes whose instances cannot be made or
unpickled (:func:`~skattn._persistence.refusing_getattr`): loading such a
pickle raises :class:`~skattn._persistence.InconsistentVersionError`, which
names the versions and the remedy.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._persistence import refusing_getattr

__getattr__ = refusing_getattr(__name__, ("AttentionClassifier", "AttentionRegressor"))
