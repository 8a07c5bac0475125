"""Texts to the token states of a pretrained sentence-transformers encoder."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import contextlib
import os
import threading
from numbers import Integral

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._input.validation import Interval, StrOptions, _fit_context
from ._cache import _CACHE
from ._pieces import _join_windows, _windows, check_word_ids, words_of_pieces
from ._words import _TextTransformer, check_texts

# The encoders TokenEmbeddings loaded, by name or path and device: the clones
# of a grid search share one (they only read it). Emptied by cache_clear.
_ENCODERS = {}
_ENCODERS_LOCK = threading.Lock()
# A Hugging Face fast tokenizer keeps its truncation setting between calls and
# sets it at each call: two threads tokenizing with one tokenizer at two lengths
# would cut each other's texts. Every call to a tokenizer holds this lock (the
# encoder's forward pass does not).
_TOKENIZER_LOCK = threading.Lock()


def _locks_after_fork_in_child():
    """A forked child has only the thread that forked: a lock another thread
    held at the fork would stay held for ever, so the child makes its own."""
    global _ENCODERS_LOCK, _TOKENIZER_LOCK
    _ENCODERS_LOCK = threading.Lock()
    _TOKENIZER_LOCK = threading.Lock()
    _CACHE._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_locks_after_fork_in_child)


class TokenEmbeddings(_TextTransformer):
    """Texts to the token states of a pretrained sentence-transformers encoder.

    Each text becomes the ``(n_tokens_i, D)`` float32 array of its word
    pieces' last-layer states, as ``SentenceTransformer.encode(texts,
    output_value="token_embeddings")`` returns them (with the encoder's
    special tokens, such as ``[CLS]`` first and ``[SEP]`` last). Needs the
    optional ``[text]`` extra (``pip install ".[text]"`` from a clone).

    Nothing is loaded when the transformer is made (so ``clone``, a grid
    search's copies and ``get_params`` never load a model): ``fit`` loads it,
    once per process for a name or a path and a ``device`` (the clones of a
    grid search share the loaded encoder, which they only read; see
    :meth:`cache_clear`). A pickle of a transformer whose ``model`` is a name
    or a path holds that name (a local directory's absolute path), not the
    weights: it loads them again when it next transforms, from the ``model``
    parameter of that moment, and raises ``FileNotFoundError`` naming the
    directory if it is not there. For an encoder directory that moved,
    ``set_params(model=<new path>)`` (in a pipeline:
    ``set_params(tokenembeddings__model=<new path>)``) points the unpickled
    transformer to its new place without fitting anything again.

    Parameters
    ----------
    model : str, path or SentenceTransformer
        The encoder: a model name of the Hugging Face hub, a local directory
        (read offline), or a loaded ``SentenceTransformer`` (never modified).

    max_length : int or None, default=None
        Word pieces read per text at most, the special tokens included
        (longer texts are cut); None: the model's ``max_seq_length`` when
        fit. ``fit`` refuses (``ValueError``) a length shorter than the
        encoder's special tokens (2 for BERT: ``[CLS]`` and ``[SEP]``) or
        longer than its position table (512 for all-MiniLM-L6-v2).

    long_texts : {"truncate", "windows"}, default="truncate"
        A text of more word pieces than ``max_length_``: ``"truncate"`` keeps
        its first ones; ``"windows"`` reads it whole, in windows of
        ``max_length_`` pieces that overlap by half, and joins their states
        into one sequence (each piece's state from the window where it is
        most central, the special tokens' from the first and last windows),
        for a model with banded attention to read (:ref:`text`).

    batch_size : int, default=32
        Texts (or windows) the encoder reads at once: the memory of the
        encoding.

    cache : bool, default=True
        Keep the token states computed in this process (at most 1 GiB, the
        least recently used first out), by fitted encoder (``model_``: the
        one loaded encoder of a name or path and device, or the model object
        given), ``max_length_`` and text, so that the folds and candidates of
        a grid search embed each text once (see :meth:`cache_info`). A model
        object is copied with each clone of the transformer (scikit-learn
        clones deep-copy such parameters): give a name or a path to share the
        cache across clones.

    device : str or None, default=None
        Where the encoder runs (``"cpu"``, ``"cuda"``); None: the
        sentence-transformers default.

    verbose : bool, default=False
        Show the progress bars of loading the encoder's weights and of
        encoding the texts.

    Attributes
    ----------
    max_length_ : int or None
        Word pieces read per text at most: ``max_length``, or the model's
        ``max_seq_length`` when fit (None: the tokenizer's own limit).
        ``transform``, ``tokens`` and the cache read this length, never the
        model's setting of the moment.

    model_ : SentenceTransformer
        The fitted encoder: ``transform`` and ``tokens`` read it (and the
        cache keys its states by it) until the next ``fit``, whatever
        ``set_params(model=...)`` sets meanwhile. In a transformer loaded
        from a pickle: None until its next ``transform`` or ``tokens`` loads
        the encoder of ``model`` (which must put out token states as wide as
        the fitted encoder's).

    n_features_out_ : int
        Width of a token state: of the ``token_embeddings`` the model puts
        out (read at fit from those of an empty text), which a ``Dense``
        module of its sentence embedding leaves as they are.

    See Also
    --------
    TokenIds : Integer ids, for a learned embedding table.
    StaticTokenEmbeddings : Word vectors looked up in a table.

    Notes
    -----
    The encoder is read, never modified: each transformer tokenizes with its
    own ``max_length_`` and runs the model's forward pass, so that one model
    object may serve several transformers at once, in several threads. It
    must be in evaluation mode (as ``SentenceTransformer`` loads it): a model
    whose dropout is on (after ``model.train()``) is refused with a
    ``ValueError``, not switched to evaluation mode.

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
        "long_texts": [StrOptions({"truncate", "windows"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "cache": ["boolean"],
        "device": [str, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self, model, *, max_length=None, long_texts="truncate", batch_size=32,
        cache=True, device=None, verbose=False,
    ):  # fmt: skip
        self.model = model
        self.max_length = max_length
        self.long_texts = long_texts
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
            _check_unicode(check_texts(X, "TokenEmbeddings"))
        self._source = _source(self.model, self.device)
        self.model_ = self.model if self._source is None else self._load()
        self.max_length_ = _check_max_length(self.model_, self.max_length)
        if self.long_texts == "windows":
            _check_window_length(self.model_, self.max_length_)
        _check_evaluation_mode(self.model_)
        self.n_features_out_ = _state_width(self.model_, self.max_length_)
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
        texts = _check_unicode(check_texts(X, "TokenEmbeddings"))
        model = self._loaded_model()
        namespace = _CACHE.namespace(model, (self.max_length_, self.long_texts))
        out = _CACHE.get_many(namespace, texts) if self.cache else [None] * len(texts)
        missing = [t for t, o in zip(texts, out, strict=True) if o is None]
        missing = list(dict.fromkeys(missing))  # each text once, in order
        encoded = dict(zip(missing, self._encode(model, missing), strict=True))
        if self.cache:
            for text, states in encoded.items():
                _CACHE.put(namespace, text, states)
        return [
            (encoded[text] if states is None else states).copy()
            for text, states in zip(texts, out, strict=True)
        ]

    def tokens(self, X):
        """The word pieces each token state of ``transform`` stands for.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        tokens : list of list of str
            The encoder tokenizer's pieces of each text, its special tokens
            included (such as ``"[CLS]"`` first and ``"[SEP]"`` last), cut at
            ``max_length_`` as ``transform`` cuts them (or whole, with
            ``long_texts="windows"``).
        """
        check_is_fitted(self, "n_features_out_")
        texts = _check_unicode(check_texts(X, "TokenEmbeddings"))
        if not texts:
            return []
        model = self._loaded_model()
        convert = model.tokenizer.convert_ids_to_tokens
        return [convert(ids) for ids in self._piece_ids(model, texts)]

    def words(self, X):
        """The words each text's word pieces come from.

        A word is what the encoder's tokenizer splits a text into before its
        pieces: a run of letters and digits, or a punctuation mark, for
        BERT-style encoders. The pieces are those of :meth:`tokens`, one per
        token state of ``transform``; each special token (such as
        ``"[CLS]"``) is a word alone.

        Parameters
        ----------
        X : list or array of str
            Texts.

        Returns
        -------
        words : list of list of str
            The words of each text in order, as written in the text (of a
            word cut at ``max_length_``, the part read), and its special
            tokens as :meth:`tokens` gives them.

        word_index : list of ndarray of shape (n_tokens_i,), dtype intp
            For each token state of ``transform`` (each piece of
            :meth:`tokens`), the index in ``words[i]`` of its word.

        Raises
        ------
        ValueError
            For an encoder whose tokenizer does not tell the words of the
            pieces (a slow tokenizer, without ``word_ids``), or that splits a
            text otherwise than the encoder reads it (a preprocessing of its
            own): :meth:`tokens` gives the pieces.
        """
        check_is_fitted(self, "n_features_out_")
        texts = _check_unicode(check_texts(X, "TokenEmbeddings"))
        if not texts:
            return [], []
        model = self._loaded_model()
        check_word_ids(model.tokenizer)
        windows = self.long_texts == "windows"
        return words_of_pieces(
            model,
            texts,
            self._piece_ids(model, texts),
            max_length=self.max_length_,
            windows=windows,
            n_prefix=len(_special_ids(model)[0]) if windows else 0,
            lock=_TOKENIZER_LOCK,
        )

    @staticmethod
    def cache_info():
        """The cache of token states of this process, as ``functools.lru_cache``
        reports its own.

        Returns
        -------
        info : CacheInfo
            ``misses``: the texts encoded (each distinct text of a call once),
            ``hits``: the other texts transformed (found in the cache, or
            repeated in a call), since the last :meth:`cache_clear`;
            ``n_texts`` and ``n_bytes`` held (each text's states own their
            memory: ``n_bytes`` is what the cache keeps alive), and
            ``max_bytes``.
        """
        return _CACHE.info()

    @staticmethod
    def cache_clear():
        """Empty the cache of token states of this process (see ``cache``),
        and let go of the encoders loaded from names and paths: the next
        ``fit`` loads its encoder again."""
        _CACHE.clear()
        with _ENCODERS_LOCK:
            _ENCODERS.clear()

    def _encode(self, model, texts):
        """The encoder's token states of ``texts``, as float32 arrays that own
        their memory (a text's states alone, not a view of its padded batch).

        The texts are cut at ``max_length_`` as they are tokenized, and read
        in batches of similar lengths (little padding), as ``encode`` reads
        them; the model is only read.
        """
        from tqdm.auto import tqdm

        if not texts:  # all cached, or none given: the tokenizer needs a text
            return []
        _check_evaluation_mode(model)
        if self.long_texts == "windows":
            return self._encode_in_windows(model, texts)
        order = np.argsort([-len(text) for text in texts], kind="stable")
        states = [None] * len(texts)
        starts = range(0, len(texts), self.batch_size)
        for start in tqdm(starts, desc="Batches", disable=not self.verbose):
            batch = order[start : start + self.batch_size]
            batch_texts = [texts[i] for i in batch]
            batch_states = _token_states(model, batch_texts, self.max_length_)
            for i, text_states in zip(batch, batch_states, strict=True):
                states[i] = text_states
        return states

    def _encode_in_windows(self, model, texts):
        """The token states of ``texts``, those longer than ``max_length_``
        read in overlapping windows and joined (see ``long_texts``)."""
        from tqdm.auto import tqdm

        prefix, suffix = _special_ids(model)
        width = self.max_length_ - len(prefix) - len(suffix)  # pieces a window
        pieces = _content_ids(model, texts)
        windows = [_windows(len(ids), width) for ids in pieces]
        # every window of every text, the longest first: little padding
        jobs = [
            (index, start) for index, starts in enumerate(windows) for start in starts
        ]
        jobs.sort(key=lambda job: -min(width, len(pieces[job[0]]) - job[1]))
        window_states = {}
        starts = range(0, len(jobs), self.batch_size)
        for begin in tqdm(starts, desc="Batches", disable=not self.verbose):
            batch = jobs[begin : begin + self.batch_size]
            ids = [
                prefix + pieces[index][start : start + width] + suffix
                for index, start in batch
            ]
            for job, states in zip(batch, _states_of_ids(model, ids), strict=True):
                window_states[job] = states
        return [
            _join_windows(
                [window_states[index, start] for start in starts],
                starts,
                len(pieces[index]),
                width,
                len(prefix),
                len(suffix),
            )
            for index, starts in enumerate(windows)
        ]

    def _piece_ids(self, model, texts):
        """The ids of each text's word pieces, as ``transform`` reads them."""
        if self.long_texts == "windows":
            prefix, suffix = _special_ids(model)
            return [prefix + ids + suffix for ids in _content_ids(model, texts)]
        features = _features(model, texts, self.max_length_)
        ids, mask = features["input_ids"], features["attention_mask"]
        return [
            row[row_mask.bool()].tolist()
            for row, row_mask in zip(ids, mask, strict=True)
        ]

    def _loaded_model(self):
        """The fitted encoder; after unpickling, the encoder of the ``model``
        parameter of the moment (a moved directory's new place), loaded once.

        Raises
        ------
        ValueError
            For an encoder whose token states are not ``n_features_out_``
            wide (another model than the one fitted).
        """
        model = self.__dict__.get("model_")
        if model is not None:
            return model
        source = _source(self.model, self.device)
        model = self.model if source is None else self._load(source)
        width = _state_width(model, self.max_length_)
        if width != self.n_features_out_:
            given = type(model).__name__ if source is None else repr(source[0])
            raise ValueError(
                f"TokenEmbeddings was fitted on an encoder of {self.n_features_out_}"
                f"-wide token states and its model parameter ({given}) puts out "
                f"{width}-wide ones: give the place of the encoder it was "
                "fitted on (set_params(model=<path>)), or fit the pipeline again on "
                "this encoder."
            )
        self._source, self.model_ = source, model
        return model

    def _load(self, source=None):
        """The encoder of a name or path and device (the fitted ones for None),
        loaded once per process."""
        source = self._source if source is None else source
        with _ENCODERS_LOCK:
            model = _ENCODERS.get(source)
            if model is None:
                model = _ENCODERS[source] = _read(*source, self.verbose)
        return model

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("_source") is not None:
            state = {**state, "model_": None}  # the name or path, not the weights
        return state


def _check_unicode(texts):
    """``texts``, each of which the encoder's tokenizer can read.

    Raises
    ------
    ValueError
        For a text that is not valid Unicode: a lone surrogate, which
        decoding bytes that are not UTF-8 with ``errors="surrogateescape"``
        leaves in a string.
    """
    for index, text in enumerate(texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(
                f"TokenEmbeddings reads valid Unicode text; X[{index}] holds "
                f"{text[error.start : error.end]!r} at character {error.start}, "
                "a lone surrogate (what decoding bytes that are not UTF-8 with "
                "errors='surrogateescape' leaves). Decode the text with its own "
                "encoding (open(path, encoding=...)), or with errors='replace'."
            ) from None
    return texts


def _state_width(model, max_length):
    """The width of the encoder's token states, read from those of an empty
    text: modules after the transformer may change it."""
    (states,) = _token_states(model, [""], max_length)
    return states.shape[1]


def _token_states(model, texts, max_length):
    """The token states of a batch of texts, each a float32 array of its own."""

    return _run_encoder(model, _features(model, texts, max_length))


def _special_ids(model):
    """The ids the tokenizer puts before and after a text's pieces (such as
    ``[CLS]`` and ``[SEP]``)."""
    tokenizer = model.tokenizer
    with _TOKENIZER_LOCK:
        full = tokenizer("a")["input_ids"]
        content = tokenizer("a", add_special_tokens=False)["input_ids"]
    for start in range(len(full) - len(content) + 1):
        if full[start : start + len(content)] == content:
            return list(full[:start]), list(full[start + len(content) :])
    raise ValueError(
        "long_texts='windows' needs a tokenizer that puts its special tokens "
        "around a text's pieces; this one does not: use long_texts='truncate'."
    )


def _content_ids(model, texts):
    """The word-piece ids of each text, whole, without the special tokens
    (the text prepared as :func:`_features` prepares it)."""
    texts = [text.strip() for text in texts]
    if getattr(model[0], "do_lower_case", False):
        texts = [text.lower() for text in texts]
    with _TOKENIZER_LOCK:
        # whole texts, longer than the encoder reads (verbose=False: without
        # the tokenizer's warning that such ids would overflow the encoder)
        encoded = model.tokenizer(texts, add_special_tokens=False, verbose=False)[
            "input_ids"
        ]
    return [list(ids) for ids in encoded]


def _states_of_ids(model, ids):
    """The token states of sequences of ids (special tokens included), each a
    float32 array of its own."""
    import torch

    probe = _features(model, [""], None)  # the inputs the encoder expects
    n_tokens = max(map(len, ids))
    padded = np.full((len(ids), n_tokens), model.tokenizer.pad_token_id or 0)
    mask = np.zeros((len(ids), n_tokens), dtype=np.int64)
    for row, sequence in enumerate(ids):
        padded[row, : len(sequence)] = sequence
        mask[row, : len(sequence)] = 1
    features = {
        key: value for key, value in probe.items() if not torch.is_tensor(value)
    }
    features["input_ids"] = torch.as_tensor(padded, dtype=torch.long)
    features["attention_mask"] = torch.as_tensor(mask)
    if "token_type_ids" in probe:
        features["token_type_ids"] = torch.zeros_like(features["input_ids"])
    return _run_encoder(model, features)


def _run_encoder(model, features):
    """The encoder's token states of a batch of its inputs, each sequence's
    valid states a float32 array of its own."""
    import torch

    features = {
        key: value.to(model.device) if torch.is_tensor(value) else value
        for key, value in features.items()
    }
    with torch.inference_mode():
        out = model(features)
    masks = out["attention_mask"].bool()
    return [
        np.array(row[mask].cpu().numpy(), dtype=np.float32)
        for row, mask in zip(out["token_embeddings"], masks, strict=True)
    ]


def _features(model, texts, max_length):
    """The encoder's inputs of ``texts``, cut at ``max_length`` word pieces,
    without setting the model's ``max_seq_length``."""
    preprocess = getattr(model, "preprocess", None)
    if preprocess is not None:  # sentence-transformers 6 and later
        with _TOKENIZER_LOCK:
            return preprocess(texts, max_length=max_length)
    # sentence-transformers 3 to 5 tokenize at the model's max_seq_length:
    # the tokenizer is called here as their Transformer module calls it
    texts = [text.strip() for text in texts]
    if getattr(model[0], "do_lower_case", False):
        texts = [text.lower() for text in texts]
    with _TOKENIZER_LOCK:
        return model.tokenizer(
            texts, padding=True, truncation="longest_first", return_tensors="pt",
            max_length=max_length,
        )  # fmt: skip


def _check_max_length(model, max_length):
    """``max_length``, or the model's ``max_seq_length`` for None.

    Raises
    ------
    ValueError
        For a length shorter than the encoder's special tokens or longer than
        its position table.
    """
    if max_length is None:
        return model.max_seq_length
    tokenizer = model.tokenizer
    with _TOKENIZER_LOCK:
        special = tokenizer.convert_ids_to_tokens(tokenizer("")["input_ids"])
    if max_length < len(special):
        raise ValueError(
            f"max_length={max_length} is shorter than the {len(special)} special "
            f"tokens ({', '.join(special)}) the encoder puts in every text: give "
            f"max_length={len(special)} or more ({len(special) + 1} or more to "
            "keep a word piece of each text)."
        )
    n_positions = _n_positions(model)
    if n_positions is not None and max_length > n_positions:
        raise ValueError(
            f"max_length={max_length} is longer than the {n_positions} positions "
            f"the encoder reads: give max_length={n_positions} or less (or None: "
            f"the model's max_seq_length, {model.max_seq_length})."
        )
    return max_length


def _check_window_length(model, max_length):
    """Refuse windows that hold no word piece (``long_texts="windows"``)."""
    prefix, suffix = _special_ids(model)
    if max_length is None or max_length <= len(prefix) + len(suffix):
        raise ValueError(
            f"long_texts='windows' reads windows of max_length word pieces, "
            f"special tokens included, and max_length_={max_length} leaves none "
            f"for the text: give max_length={len(prefix) + len(suffix) + 1} or "
            "more."
        )


def _n_positions(model):
    """The word pieces the encoder's position table holds (None if unknown):
    ``max_position_embeddings`` of its transformer, less the positions
    RoBERTa-like embeddings skip (they number from ``padding_idx + 1``)."""
    import torch

    transformer = getattr(model[0], "auto_model", None)
    config = getattr(transformer, "config", None)
    n_positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(n_positions, Integral):
        return None
    for module in transformer.modules():
        padding_idx = getattr(module, "padding_idx", None)
        table = getattr(module, "position_embeddings", None)
        if isinstance(padding_idx, int) and isinstance(table, torch.nn.Embedding):
            return n_positions - padding_idx - 1
    return n_positions


def _check_evaluation_mode(model):
    """Raise a ValueError if a part of the encoder that predicts otherwise
    than it trains (a transformers model, dropout, batch norm) is training."""
    import torch
    from transformers import PreTrainedModel

    kinds = (
        PreTrainedModel,
        torch.nn.modules.dropout._DropoutNd,
        torch.nn.modules.batchnorm._BatchNorm,
    )
    training = [
        type(module).__name__
        for module in model.modules()
        if module.training and isinstance(module, kinds)
    ]
    if training:
        raise ValueError(
            f"The encoder is in training mode ({len(training)} modules, such as "
            f"{training[0]}): its dropout would make the token states random. "
            "TokenEmbeddings does not change the model it is given: call "
            "model.eval() on it first."
        )


def _source(model, device):
    """Where ``model`` loads from: its name, or its directory's absolute path,
    and the device; None for a SentenceTransformer given as an object."""
    if not isinstance(model, (str, os.PathLike)):
        if not callable(getattr(model, "encode", None)):
            raise TypeError(
                "model must be a sentence-transformers model name, a path to one, "
                f"or a SentenceTransformer; got {type(model).__name__}."
            )
        return None
    path = os.fspath(model)
    return (os.path.abspath(path) if os.path.isdir(path) else path), device


def _read(path, device, verbose):
    """The SentenceTransformer of a name or an absolute path (a directory).

    Raises
    ------
    FileNotFoundError
        For an absolute path that is not a directory.
    """
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ImportError(
            "TokenEmbeddings needs sentence-transformers: pip install "
            "sentence-transformers, or the optional [text] extra of skattn "
            '(pip install ".[text]" from a clone of its repository).'
        ) from error
    local = os.path.isabs(path)  # a name of the hub is never absolute
    if local and not os.path.isdir(path):
        raise FileNotFoundError(
            f"TokenEmbeddings cannot load its encoder: there is no directory "
            f"{path!r}. Put the model directory there, or give the transformer "
            "the model's new place: set_params(model=<new path>) (in a pipeline: "
            "set_params(tokenembeddings__model=<new path>)); a fitted transformer "
            "loaded from a pickle reads it at its next transform, without being "
            "fitted again."
        )
    with _progress_bars(verbose):
        return SentenceTransformer(path, device=device, local_files_only=local)


@contextlib.contextmanager
def _progress_bars(shown):
    """Transformers' progress bars (such as its "Loading weights") shown or
    hidden, then as found. They are hidden and shown again with those of
    huggingface_hub, as transformers switches them."""
    from transformers.utils import logging

    if shown or not logging.is_progress_bar_enabled():
        yield
        return
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.enable_progress_bar()
