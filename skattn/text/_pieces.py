"""The word pieces of a pretrained encoder's tokenizer: the windows in which
TokenEmbeddings reads a long text, and the words the pieces come from."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np


def _windows(n_pieces, width):
    """The starts of the windows of ``width`` pieces that cover ``n_pieces``,
    each overlapping the next by half (one window for a text that fits)."""
    if n_pieces <= width:
        return [0]
    stride = max(1, width // 2)
    starts = list(range(0, n_pieces - width, stride))
    return [*starts, n_pieces - width]


def _join_windows(states, starts, n_pieces, width, n_prefix, n_suffix):
    """One sequence of the states of a text's windows: the prefix's states of
    the first window, each piece's state from the window where it is most
    central (overlaps split at their middle), the suffix's of the last."""
    if len(starts) == 1:
        return states[0]
    parts = [states[0][:n_prefix]]
    begin = 0
    for index, start in enumerate(starts):
        stop = n_pieces
        if index + 1 < len(starts):  # the middle of the overlap with the next
            stop = (starts[index + 1] + min(start + width, n_pieces) + 1) // 2
        parts.append(states[index][n_prefix + begin - start : n_prefix + stop - start])
        begin = stop
    parts.append(states[-1][len(states[-1]) - n_suffix :])
    return np.ascontiguousarray(np.concatenate(parts))


def check_word_ids(tokenizer):
    """Raise a ValueError for a tokenizer that does not tell the word each
    piece comes from (a slow tokenizer, without ``word_ids``)."""
    if getattr(tokenizer, "is_fast", False):
        return
    raise ValueError(
        "TokenEmbeddings.words needs a fast tokenizer, which tells the word each "
        f"piece comes from (word_ids); the encoder's {type(tokenizer).__name__} "
        "is a slow one. Show the word pieces instead: TokenEmbeddings.tokens, or "
        "tokens='pieces' in TokenAttributionDisplay.from_estimator and "
        "AttentionDisplay.from_estimator; or give an encoder with a fast "
        "tokenizer (pip install tokenizers)."
    )


def words_of_pieces(model, texts, pieces, *, max_length, windows, n_prefix, lock):
    """The words of each text and the word of each of its pieces.

    ``pieces`` holds the ids of each text's pieces as ``transform`` reads
    them; the texts are tokenized again as they were for them (cut at
    ``max_length``, or whole between ``n_prefix`` special tokens and the
    others with ``windows``), with offsets and word ids, holding ``lock``.
    A special token is a word of its own, labelled by its piece.

    Returns
    -------
    words : list of list of str
    word_index : list of ndarray of shape (n_pieces_i,), dtype intp

    Raises
    ------
    ValueError
        For a text whose pieces tokenized again are not ``pieces``.
    """
    if not texts:
        return [], []
    tokenizer = model.tokenizer
    # as TokenEmbeddings prepares a text: _content_ids for windows, _features
    # of sentence-transformers 3 to 5 (without preprocess) for cut texts
    strip = windows or getattr(model, "preprocess", None) is None
    lowercase = strip and getattr(model[0], "do_lower_case", False)
    read = [_as_read(text, strip, lowercase) for text in texts]
    options = (
        {"add_special_tokens": False, "verbose": False}
        if windows
        else {"truncation": "longest_first", "max_length": max_length}
    )
    with lock:
        encoded = tokenizer(
            [text for text, _, _ in read], return_offsets_mapping=True, **options
        )
    all_words, all_index = [], []
    for row, (ids, (_, source, shift)) in enumerate(zip(pieces, read, strict=True)):
        found = list(encoded["input_ids"][row])
        word_ids = list(encoded.word_ids(row))
        offsets = list(encoded["offset_mapping"][row])
        if windows:
            n_suffix = len(ids) - n_prefix - len(found)
            found = [*ids[:n_prefix], *found, *ids[len(ids) - n_suffix :]]
            word_ids = [None] * n_prefix + word_ids + [None] * n_suffix
            offsets = [(0, 0)] * n_prefix + offsets + [(0, 0)] * n_suffix
        if found != list(ids):
            raise ValueError(
                f"TokenEmbeddings.words cannot tell the words of X[{row}]: its "
                "tokenizer splits the text into other pieces than the encoder "
                "reads (a preprocessing of the encoder's own). Show the word "
                "pieces instead: TokenEmbeddings.tokens, or tokens='pieces' in "
                "the displays of skattn.plotting."
            )
        words, index = _group(tokenizer, ids, word_ids, offsets, source, shift)
        all_words.append(words)
        all_index.append(index)
    return all_words, all_index


def _as_read(text, strip, lowercase):
    """The text the tokenizer reads, the text its words are taken from, and
    where the text read starts in it."""
    if not strip:
        return text, text, 0
    read = text.strip()
    shift = len(text) - len(text.lstrip())
    if lowercase:
        lowered = read.lower()
        if len(lowered) != len(read):  # offsets of the lowered text only
            return lowered, lowered, 0
        read = lowered
    return read, text, shift


def _group(tokenizer, ids, word_ids, offsets, source, shift):
    """The words of one text's pieces (the pieces of a word are consecutive;
    each special token, of word id None, is a word alone), and the index of
    each piece's word."""
    groups = []  # (word id, positions of its pieces)
    for position, word in enumerate(word_ids):
        if word is None or not groups or groups[-1][0] != word:
            groups.append((word, []))
        groups[-1][1].append(position)
    words = []
    index = np.empty(len(ids), dtype=np.intp)
    for number, (word, positions) in enumerate(groups):
        index[positions] = number
        pieces = tokenizer.convert_ids_to_tokens([ids[p] for p in positions])
        if word is None:
            words.append(pieces[0])
            continue
        start = min(offsets[p][0] for p in positions)
        stop = max(offsets[p][1] for p in positions)
        label = source[shift + start : shift + stop].strip()
        words.append(label or tokenizer.convert_tokens_to_string(pieces).strip())
    return words, index
