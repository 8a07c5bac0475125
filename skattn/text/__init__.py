"""Raw text in: texts to the token sequences the attention estimators read.

Three ways from a list of strings to tokens, each a scikit-learn transformer
for the first step of a :class:`~sklearn.pipeline.Pipeline`:

- :class:`TokenIds`: integer ids of a vocabulary learned in ``fit``, for an
  estimator with ``vocabulary_size="auto"``, which learns an embedding table;
- :class:`TokenEmbeddings`: the last-layer token states of a pretrained
  sentence-transformers encoder (the optional ``[text]`` extra);
- :class:`StaticTokenEmbeddings`: word vectors looked up in a table (a
  mapping, gensim ``KeyedVectors``, or a vocabulary and a matrix).

The texts are split into words as scikit-learn's
:class:`~sklearn.feature_extraction.text.CountVectorizer` splits them, unless a
``tokenizer`` is given. Read more in the :ref:`User Guide <text>`.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from ._pretrained import TokenEmbeddings
from ._words import StaticTokenEmbeddings, TokenIds

__all__ = ["StaticTokenEmbeddings", "TokenEmbeddings", "TokenIds"]
