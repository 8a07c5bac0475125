"""Texts to words: integer ids of a learned vocabulary, or word vectors."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
from collections import Counter
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.utils.validation import check_is_fitted

from .._input.validation import Interval, _fit_context
from .._persistence import VersionedState

UNKNOWN = 0  # the id of tokens not in the vocabulary
NO_WORD = "[UNK]"  # the token of a text without a word (the one token it gets)


def check_texts(X, name):
    """X as a list of strings.

    Raises
    ------
    TypeError
        For a single string, or elements that are not strings.
    """
    if isinstance(X, (str, bytes)):
        raise TypeError(
            f"{name} reads a collection of texts (a list or array of strings), "
            "got a single string: pass [text]."
        )
    if getattr(X, "ndim", 1) != 1:
        raise ValueError(
            f"{name} reads a 1-D collection of texts, got {type(X).__name__} of "
            f"shape {X.shape}: pass its column of texts (X['text'] of a "
            "DataFrame, X[:, 0] of an array)."
        )
    texts = list(X)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"{name} reads strings; X[{index}] is a {type(text).__name__} "
                f"({text!r:.60})."
            )
    return texts


def _analyzer(tokenizer, lowercase):
    """The words of a text, as CountVectorizer splits them."""
    vectorizer = CountVectorizer(
        tokenizer=tokenizer,
        lowercase=lowercase,
        token_pattern=None if tokenizer is not None else r"(?u)\b\w\w+\b",
    )
    return vectorizer.build_analyzer()


class _TextTransformer(VersionedState, TransformerMixin, BaseEstimator):
    """What the transformers of texts share: their tags, and pickles that
    record the version of skattn."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.requires_fit = True
        return tags


class TokenIds(_TextTransformer):
    """Texts to sequences of integer token ids, of a vocabulary learned in fit.

    Each text becomes a 1-D ``int64`` array, one id per word in order: the
    word's place (from 1) in the sorted vocabulary, 0 for a word not in it.
    A text with no word becomes ``[0]``: no text is ever a zero-length
    sequence. For :class:`~skattn.AttentionClassifier` (or its siblings) with
    ``vocabulary_size="auto"``, which learns an embedding of each id.

    Parameters
    ----------
    tokenizer : callable or None, default=None
        Splits a (lowercased) text into words; None: as
        :class:`~sklearn.feature_extraction.text.CountVectorizer` does (words of
        two or more letters or digits). What it raises, ``fit`` and
        ``transform`` raise.

    lowercase : bool, default=True
        Lowercase the texts before splitting them.

    min_df : int or float, default=1
        Leave out of the vocabulary the words of fewer documents than this
        (a share of the documents for a float), as in ``CountVectorizer``.

    max_features : int or None, default=None
        Keep the ``max_features`` most frequent words only.

    max_length : int or None, default=None
        Keep the first ``max_length`` words of each text; None: all.

    Attributes
    ----------
    vocabulary_ : dict of str to int
        The id of each word, from 1.

    See Also
    --------
    TokenEmbeddings : Token states of a pretrained encoder.
    StaticTokenEmbeddings : Word vectors looked up in a table.

    Examples
    --------
    >>> from skattn.text import TokenIds
    >>> ids = TokenIds().fit(["the film was good", "the plot was bad"])
    >>> ids.vocabulary_
    {'bad': 1, 'film': 2, 'good': 3, 'plot': 4, 'the': 5, 'was': 6}
    >>> [x.tolist() for x in ids.transform(["a good plot", "?"])]
    [[3, 4], [0]]
    """

    _parameter_constraints: dict = {
        "tokenizer": [callable, None],
        "lowercase": ["boolean"],
        "min_df": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="both"),
        ],
        "max_features": [Interval(Integral, 1, None, closed="left"), None],
        "max_length": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self, *, tokenizer=None, lowercase=True, min_df=1, max_features=None,
        max_length=None,
    ):  # fmt: skip
        self.tokenizer = tokenizer
        self.lowercase = lowercase
        self.min_df = min_df
        self.max_features = max_features
        self.max_length = max_length

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the vocabulary of the texts.

        Parameters
        ----------
        X : list or array of str
            Texts.

        y : None
            Ignored.

        Returns
        -------
        self : TokenIds
        """
        analyzer = self.build_analyzer()
        # split here, outside the try: an error of the tokenizer's is raised
        documents = [analyzer(text) for text in check_texts(X, "TokenIds")]
        vectorizer = CountVectorizer(
            analyzer=iter,  # the words of each document, split above
            token_pattern=None,
            min_df=self.min_df,
            max_features=self.max_features,
        )
        try:
            vectorizer.fit(documents)
            words = sorted(vectorizer.vocabulary_)
        except ValueError:  # no word in any text, or none left by min_df
            words = []
        self.vocabulary_ = {word: index + 1 for index, word in enumerate(words)}
        return self

    def build_analyzer(self):
        """The callable that splits a text into the words ``transform`` reads
        (before ``max_length``), as ``CountVectorizer.build_analyzer``.

        Returns
        -------
        analyzer : callable
            Text to list of str.
        """
        return _analyzer(self.tokenizer, self.lowercase)

    def transform(self, X):
        """The ids of each text's words.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        ids : list of ndarray of shape (n_tokens_i,), dtype int64
            One array per text, at least one id each.
        """
        words = self._words(X)
        vocabulary = self.vocabulary_
        return [
            np.array([vocabulary.get(w, UNKNOWN) for w in text] or [UNKNOWN], np.int64)
            for text in words
        ]

    def tokens(self, X):
        """The words each id of ``transform`` stands for.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        tokens : list of list of str
            One word per id, in order (a word not in the vocabulary as it is;
            ``"[UNK]"`` for the id of a text without a word).

        Examples
        --------
        >>> from skattn.text import TokenIds
        >>> TokenIds().fit(["a good film"]).tokens(["A bad film", "?"])
        [['bad', 'film'], ['[UNK]']]
        """
        return [words or [NO_WORD] for words in self._words(X)]

    def _words(self, X):
        """The words of each text that ``transform`` reads (possibly none)."""
        check_is_fitted(self)
        analyzer = self.build_analyzer()
        return [
            analyzer(text)[: self.max_length] for text in check_texts(X, "TokenIds")
        ]


class StaticTokenEmbeddings(_TextTransformer):
    """Texts to sequences of word vectors looked up in a table.

    Each text becomes an array of the vectors of its known words, in order;
    words not in the table are left out, and a text without a known word
    becomes one vector of zeros (no text is ever a zero-length sequence).

    Parameters
    ----------
    vectors : mapping, gensim KeyedVectors or (vocabulary, matrix)
        The word vectors: a mapping of word to vector, an object with
        gensim's ``key_to_index`` and ``vectors`` (``KeyedVectors``), or a pair
        of a vocabulary (a list of words, each once, or a mapping of word to
        row, an integer from 0 to the matrix's rows - 1) and a matrix with
        one row per word. Never copied nor modified: a clone
        (:func:`~sklearn.base.clone`, as a grid search makes for each
        candidate and fold) shares it.

    tokenizer : callable or None, default=None
        Splits a (lowercased) text into words; None: as
        :class:`~sklearn.feature_extraction.text.CountVectorizer` does.

    lowercase : bool, default=True
        Lowercase the texts before splitting them.

    Attributes
    ----------
    n_features_out_ : int
        Width of a word vector.

    See Also
    --------
    TokenIds : Integer ids, for a learned embedding table.
    TokenEmbeddings : Token states of a pretrained encoder.

    Examples
    --------
    >>> import numpy as np
    >>> from skattn.text import StaticTokenEmbeddings
    >>> vectors = {"good": np.array([1.0, 0.0]), "film": np.array([0.0, 1.0])}
    >>> words = StaticTokenEmbeddings(vectors).fit_transform(["A good film!", "?"])
    >>> [w.tolist() for w in words]
    [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0]]]
    """

    _parameter_constraints: dict = {
        "vectors": "no_validation",
        "tokenizer": [callable, None],
        "lowercase": ["boolean"],
    }

    def __init__(self, vectors, *, tokenizer=None, lowercase=True):
        self.vectors = vectors
        self.tokenizer = tokenizer
        self.lowercase = lowercase

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Check the table of vectors (the texts are not needed).

        Parameters
        ----------
        X : list or array of str, default=None
            Texts; only checked.

        y : None
            Ignored.

        Returns
        -------
        self : StaticTokenEmbeddings

        Raises
        ------
        ValueError
            For a vocabulary that lists a word twice, or gives a word a row
            that is not an integer from 0 to the matrix's rows - 1.
        """
        if X is not None:
            check_texts(X, "StaticTokenEmbeddings")
        table = _WordVectors(self.vectors)
        table.check_rows()
        self.n_features_out_ = table.width
        return self

    def __sklearn_clone__(self):
        """A clone that shares ``vectors`` instead of copying it
        (:func:`~sklearn.base.clone` deep-copies the other parameters).

        Returns
        -------
        clone : StaticTokenEmbeddings
            Unfitted, with the same parameters; ``vectors`` is this estimator's.
        """
        template = copy.copy(self)  # this estimator is not modified
        template.vectors = None
        clone = super(StaticTokenEmbeddings, template).__sklearn_clone__()
        clone.vectors = self.vectors
        return clone

    def transform(self, X):
        """The vectors of each text's known words.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        tokens : list of ndarray of shape (n_tokens_i, ``n_features_out_``)
            In the dtype of the vectors (float64 for integer ones).
        """
        table = _WordVectors(self.vectors)
        return [
            table.rows(words) if words else np.zeros((1, table.width), table.dtype)
            for words in self._known_words(X, table)
        ]

    def tokens(self, X):
        """The words each vector of ``transform`` stands for.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        tokens : list of list of str
            The known words of each text, in order; ``["[UNK]"]`` for a text
            without one (its vector of zeros).
        """
        known = self._known_words(X, _WordVectors(self.vectors))
        return [words or [NO_WORD] for words in known]

    def _known_words(self, X, table):
        """The words of each text found in the table (possibly none)."""
        check_is_fitted(self)
        analyzer = _analyzer(self.tokenizer, self.lowercase)
        return [
            [word for word in analyzer(text) if word in table]
            for text in check_texts(X, "StaticTokenEmbeddings")
        ]


class _WordVectors:
    """A table of word vectors in any of the forms ``vectors`` takes: the
    words it has, their width and dtype, and their rows.

    A mapping of word to vector is read as it is, without stacking its vectors.

    Raises
    ------
    TypeError
        For another kind of ``vectors``.
    ValueError
        For vectors of no or different widths, a list of words that holds a
        word twice, or a vocabulary and a matrix of different lengths.
    """

    def __init__(self, vectors):
        self.mapping = None
        if hasattr(vectors, "key_to_index") and hasattr(vectors, "vectors"):
            self.index, self.matrix = vectors.key_to_index, _matrix(vectors.vectors)
        elif isinstance(vectors, Mapping):
            if not vectors:
                raise ValueError("vectors is an empty mapping: no word has a vector.")
            self.mapping = self.index = vectors
            first = _row(next(iter(vectors.values())))
            self.width, self.dtype = first.shape[0], first.dtype
            return
        elif isinstance(vectors, tuple) and len(vectors) == 2:
            vocabulary, matrix = vectors
            self.matrix = _matrix(matrix)
            if not isinstance(vocabulary, Mapping):
                vocabulary = _rows_of(vocabulary)
            if len(vocabulary) != len(self.matrix):
                raise ValueError(
                    f"vectors is a vocabulary of {len(vocabulary)} words and a "
                    f"matrix of {len(self.matrix)} rows: give one row per word."
                )
            self.index = vocabulary
        else:
            raise TypeError(
                "vectors must be a mapping of word to vector, gensim KeyedVectors "
                "(with key_to_index and vectors) or a pair (vocabulary, matrix); "
                f"got {type(vectors).__name__}."
            )
        self.width, self.dtype = self.matrix.shape[1], self.matrix.dtype

    def check_rows(self):
        """Raise a ValueError for a word of the vocabulary whose row is not one
        of the matrix (an integer from 0 to its rows - 1), naming it."""
        if self.mapping is not None:
            return
        n_rows = len(self.matrix)
        rows = np.array(list(self.index.values()))
        if rows.dtype.kind in "iu" and rows.min() >= 0 and rows.max() < n_rows:
            return
        for word, row in self.index.items():
            if not isinstance(row, Integral) or isinstance(row, bool):
                problem = f"{row!r}, not an integer"
            elif not 0 <= row < n_rows:
                problem = (
                    f"{row}, outside the matrix's {n_rows} row(s) (0 to {n_rows - 1})"
                )
            else:
                continue
            raise ValueError(
                f"The vocabulary of vectors gives {str(word)!r} the row {problem}: "
                "give each word the row of its vector, counted from 0 (a "
                "negative row does not count from the end)."
            )

    def __contains__(self, word):
        return word in self.index

    def rows(self, words):
        """The vectors of ``words`` (all in the table), ``(len(words), width)``."""
        if self.mapping is None:
            return self.matrix[[self.index[word] for word in words]]
        rows = [_row(self.mapping[word], self.dtype) for word in words]
        if any(row.shape != (self.width,) for row in rows):
            raise ValueError(
                f"The word vectors must all have {self.width} values, as the first."
            )
        return np.stack(rows)


def _rows_of(words):
    """The row of each word of a list of words: its place.

    Raises
    ------
    ValueError
        For a word listed twice, naming it.
    """
    rows = {word: row for row, word in enumerate(words)}
    if len(rows) == len(words):
        return rows
    repeated = [
        f"{str(word)!r} appears {count} times"
        for word, count in Counter(words).items()
        if count > 1
    ]
    more = f", and {len(repeated) - 5} more words" if len(repeated) > 5 else ""
    raise ValueError(
        f"The vocabulary of vectors lists words more than once "
        f"({', '.join(repeated[:5])}{more}), and a word has one row of the "
        "matrix: list each word once, with its one row."
    )


def _matrix(matrix):
    """A 2D float matrix of word vectors (float64 for integer ones)."""
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise ValueError(
            f"The word vectors must be a 2D matrix of one row per word, got shape "
            f"{matrix.shape}."
        )
    return matrix if matrix.dtype.kind == "f" else matrix.astype(np.float64)


def _row(vector, dtype=None):
    """A 1-D float word vector."""
    row = np.asarray(vector, dtype=dtype)
    if row.ndim != 1 or row.shape[0] == 0:
        raise ValueError(
            f"Each word vector must be a 1-D array, got shape {row.shape}."
        )
    return row if row.dtype.kind == "f" else row.astype(np.float64)
