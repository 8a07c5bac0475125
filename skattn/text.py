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

import os
import threading
import uuid
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.utils.validation import check_is_fitted

from ._validation import Interval, _fit_context

__all__ = ["StaticTokenEmbeddings", "TokenEmbeddings", "TokenIds"]

UNKNOWN = 0  # the id of tokens not in the vocabulary


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


class _TextTransformer(TransformerMixin, BaseEstimator):
    """What the transformers of texts share: their tags."""

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
        two or more letters or digits).

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
        texts = check_texts(X, "TokenIds")
        vectorizer = CountVectorizer(
            tokenizer=self.tokenizer,
            lowercase=self.lowercase,
            token_pattern=None if self.tokenizer is not None else r"(?u)\b\w\w+\b",
            min_df=self.min_df,
            max_features=self.max_features,
        )
        try:
            vectorizer.fit(texts)
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
        check_is_fitted(self)
        analyzer = self.build_analyzer()
        vocabulary = self.vocabulary_
        out = []
        for text in check_texts(X, "TokenIds"):
            words = analyzer(text)[: self.max_length]
            ids = [vocabulary.get(word, UNKNOWN) for word in words] or [UNKNOWN]
            out.append(np.array(ids, dtype=np.int64))
        return out


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
        of a vocabulary (a list of words, or a mapping of word to row) and a
        matrix with one row per word. Never copied nor modified.

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
        """
        if X is not None:
            check_texts(X, "StaticTokenEmbeddings")
        self.n_features_out_ = _WordVectors(self.vectors).width
        return self

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
        check_is_fitted(self)
        table = _WordVectors(self.vectors)
        analyzer = _analyzer(self.tokenizer, self.lowercase)
        out = []
        for text in check_texts(X, "StaticTokenEmbeddings"):
            words = [word for word in analyzer(text) if word in table]
            if words:
                out.append(table.rows(words))
            else:
                out.append(np.zeros((1, table.width), dtype=table.dtype))
        return out


class _WordVectors:
    """A table of word vectors in any of the forms ``vectors`` takes: the
    words it has, their width and dtype, and their rows.

    A mapping of word to vector is read as it is, without stacking its vectors.

    Raises
    ------
    TypeError
        For another kind of ``vectors``.
    ValueError
        For vectors of no or different widths, or a vocabulary and a matrix of
        different lengths.
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
                vocabulary = {word: row for row, word in enumerate(vocabulary)}
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


# The token states TokenEmbeddings computed, by model, length and text: a
# grid search re-embeds no text its folds and candidates share. At most
# CACHE_BYTES in all; the texts used least recently go first.
CACHE_BYTES = 2**30


CacheInfo = namedtuple("CacheInfo", "hits misses n_texts n_bytes max_bytes")


class _TokenStateCache:
    """A process-wide cache of token states, bounded in bytes (LRU)."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self._entries = OrderedDict()  # (namespace, text) -> array
        self._n_bytes = 0
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        self._object_keys = weakref.WeakKeyDictionary()  # model object -> key

    def namespace(self, model, max_length):
        """The key of a model (its name or path, or the object) and length."""
        if isinstance(model, (str, os.PathLike)):
            return ("path", os.fspath(model), max_length)
        with self._lock:
            key = self._object_keys.setdefault(model, uuid.uuid4().hex)
        return ("object", key, max_length)

    def get(self, namespace, text):
        with self._lock:
            value = self._entries.get((namespace, text))
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
                self._entries.move_to_end((namespace, text))
            return value

    def put(self, namespace, text, value):
        if value.nbytes > self.max_bytes:
            return
        with self._lock:
            key = (namespace, text)
            if key in self._entries:
                return
            self._entries[key] = value
            self._n_bytes += value.nbytes
            while self._n_bytes > self.max_bytes:
                _, old = self._entries.popitem(last=False)
                self._n_bytes -= old.nbytes

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._n_bytes = 0
            self.hits = self.misses = 0

    def info(self):
        with self._lock:
            return CacheInfo(
                self.hits, self.misses, len(self._entries), self._n_bytes,
                self.max_bytes,
            )  # fmt: skip


_CACHE = _TokenStateCache(CACHE_BYTES)

# Texts encoded at once by TokenEmbeddings: the model's token states are
# turned into numpy arrays a chunk at a time.
ENCODE_CHUNK = 1024


class TokenEmbeddings(_TextTransformer):
    """Texts to the token states of a pretrained sentence-transformers encoder.

    Each text becomes the ``(n_tokens_i, D)`` float32 array of its word
    pieces' last-layer states, as ``SentenceTransformer.encode(texts,
    output_value="token_embeddings")`` returns them (with the encoder's
    special tokens, such as ``[CLS]`` first and ``[SEP]`` last). Needs the
    optional ``[text]`` extra (``pip install "skattn[text]"``).

    Nothing is loaded when the transformer is made (so ``clone``, a grid
    search's copies and ``get_params`` never load a model): ``fit`` loads it,
    and a pickle of a transformer whose ``model`` is a name or a path holds
    that name, not the weights (it loads them again when it next transforms).

    Parameters
    ----------
    model : str, path or SentenceTransformer
        The encoder: a model name of the Hugging Face hub, a local directory
        (read offline), or a loaded ``SentenceTransformer`` (never modified).

    max_length : int or None, default=None
        Word pieces read per text at most (longer texts are cut); None: the
        model's ``max_seq_length``.

    batch_size : int, default=32
        Texts the encoder reads at once: the memory of the encoding.

    cache : bool, default=True
        Keep the token states computed in this process (at most 1 GiB, the
        least recently used first out), by model name or path (or model
        object), ``max_length`` and text, so that the folds and candidates of a
        grid search embed each text once (see :meth:`cache_info`). A model
        object is copied with each clone of the transformer (scikit-learn
        clones deep-copy such parameters): give a name or a path to share the
        cache across clones.

    device : str or None, default=None
        Where the encoder runs (``"cpu"``, ``"cuda"``); None: the
        sentence-transformers default.

    verbose : bool, default=False
        Show the encoder's progress bar.

    Attributes
    ----------
    n_features_out_ : int
        Width of a token state.

    See Also
    --------
    TokenIds : Integer ids, for a learned embedding table.
    StaticTokenEmbeddings : Word vectors looked up in a table.

    Examples
    --------
    >>> from skattn.text import TokenEmbeddings
    >>> embed = TokenEmbeddings("sentence-transformers/all-MiniLM-L6-v2")
    >>> embed.get_params()["max_length"] is None  # nothing loaded yet
    True
    """

    _parameter_constraints: dict = {
        "model": "no_validation",
        "max_length": [Interval(Integral, 1, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "cache": ["boolean"],
        "device": [str, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self, model, *, max_length=None, batch_size=32, cache=True, device=None,
        verbose=False,
    ):  # fmt: skip
        self.model = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache = cache
        self.device = device
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        """Load the encoder (the texts are not needed).

        Parameters
        ----------
        X : list or array of str, default=None
            Texts; only checked.

        y : None
            Ignored.

        Returns
        -------
        self : TokenEmbeddings
        """
        if X is not None:
            check_texts(X, "TokenEmbeddings")
        self.model_ = _load(self.model, self.device)
        dimension = getattr(self.model_, "get_embedding_dimension", None)
        if dimension is None:  # sentence-transformers before 6
            dimension = self.model_.get_sentence_embedding_dimension
        self.n_features_out_ = dimension()
        return self

    def transform(self, X):
        """The token states of each text.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        tokens : list of ndarray of shape (n_tokens_i, ``n_features_out_``)
            float32 token states, one array per text.
        """
        check_is_fitted(self, "n_features_out_")
        texts = check_texts(X, "TokenEmbeddings")
        model = self._loaded_model()
        namespace = _CACHE.namespace(self.model, self.max_length)
        out = [_CACHE.get(namespace, text) if self.cache else None for text in texts]
        missing = [t for t, o in zip(texts, out, strict=True) if o is None]
        missing = list(dict.fromkeys(missing))  # each text once, in order
        encoded = {}
        for start in range(0, len(missing), ENCODE_CHUNK):
            chunk = missing[start : start + ENCODE_CHUNK]
            for text, states in zip(chunk, self._encode(model, chunk), strict=True):
                encoded[text] = states
                if self.cache:
                    _CACHE.put(namespace, text, states)
        return [
            (encoded[text] if states is None else states).copy()
            for text, states in zip(texts, out, strict=True)
        ]

    @staticmethod
    def cache_info():
        """The cache of token states of this process, as ``functools.lru_cache``
        reports its own.

        Returns
        -------
        info : CacheInfo
            ``hits`` and ``misses`` (texts found and encoded since the last
            :meth:`cache_clear`), ``n_texts`` and ``n_bytes`` held, and
            ``max_bytes``.
        """
        return _CACHE.info()

    @staticmethod
    def cache_clear():
        """Empty the cache of token states of this process (see ``cache``)."""
        _CACHE.clear()

    def _encode(self, model, texts):
        """The encoder's token states of ``texts``, as float32 arrays."""
        saved = model.max_seq_length
        if self.max_length is not None:
            model.max_seq_length = self.max_length
        try:
            states = model.encode(
                texts,
                output_value="token_embeddings",
                batch_size=self.batch_size,
                show_progress_bar=bool(self.verbose),
                convert_to_numpy=False,
            )
        finally:
            model.max_seq_length = saved
        return [np.asarray(s.detach().cpu().numpy(), dtype=np.float32) for s in states]

    def _loaded_model(self):
        """The fitted encoder, loaded again after unpickling if needed."""
        model = self.__dict__.get("model_")
        if model is None:
            model = self.model_ = _load(self.model, self.device)
        return model

    def __getstate__(self):
        state = super().__getstate__()
        if isinstance(self.model, (str, os.PathLike)):
            state = {**state, "model_": None}  # the name or path, not the weights
        return state


def _load(model, device):
    """A SentenceTransformer from a name, a path or itself."""
    if not isinstance(model, (str, os.PathLike)):
        if not callable(getattr(model, "encode", None)):
            raise TypeError(
                "model must be a sentence-transformers model name, a path to one, "
                f"or a SentenceTransformer; got {type(model).__name__}."
            )
        return model
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ImportError(
            "TokenEmbeddings needs sentence-transformers, the optional [text] "
            'extra of skattn: pip install "skattn[text]".'
        ) from error
    path = os.fspath(model)
    local = os.path.isdir(path)
    return SentenceTransformer(path, device=device, local_files_only=local)
