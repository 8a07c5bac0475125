"""The version of skattn (``skattn.__version__``).

A module of its own so that the code below the package can read it: the
version a pickle records (``_persistence``) and the one the build reads
(``pyproject.toml``).
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

__version__ = "0.1.0.dev0"
