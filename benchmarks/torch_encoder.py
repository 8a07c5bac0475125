"""A one-layer ``torch.nn.TransformerEncoder`` as a scikit-learn estimator.

The baseline that ``benchmarks/realdata.py`` calls ``torch-encoder``: what a
practitioner would write in PyTorch for the same inputs as
``skattn.AttentionTransformer`` (a 2D table of scalar tokens, a 3D array
``(n, T, D)`` or a list of ``(T_i, D)`` arrays):

- token features standardised with the training tokens' mean and standard
  deviation (padding excluded);
- a linear projection to ``d_model=64``, plus sinusoidal positions;
- one ``TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
  dropout=0.1, batch_first=True)``, with a key padding mask for ragged input;
- mean pooling over the valid tokens, then a linear head: softmax cross-entropy
  for classes, squared error on the standardised target for regression;
- Adam (learning rate 1e-3), minibatches of 32, up to ``max_epochs=200``
  epochs with early stopping: 10 % of the training set (stratified for
  classes when there are at least as many validation samples as classes) is
  held out, training stops after ``patience=20`` epochs without a
  lower validation loss, and the weights of the best epoch are restored.

Needs ``torch`` (``benchmarks/requirements.txt``); never a dependency of skattn.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import copy
import math

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from torch import nn


def as_sequences(X):
    """A list of ``(T_i, D)`` float32 arrays: a table's columns become scalar tokens."""
    if isinstance(X, list):
        return [np.asarray(seq, dtype=np.float32) for seq in X]
    X = np.asarray(X, dtype=np.float32)
    if X.ndim == 2:
        X = X[:, :, None]
    return list(X)


def pad(sequences):
    """Zero-padded ``(n, T_max, D)`` tensor and its ``(n, T_max)`` padding mask."""
    n_tokens = max(len(seq) for seq in sequences)
    out = np.zeros((len(sequences), n_tokens, sequences[0].shape[1]), np.float32)
    padding = np.ones((len(sequences), n_tokens), dtype=bool)
    for i, seq in enumerate(sequences):
        out[i, : len(seq)] = seq
        padding[i, : len(seq)] = False
    return torch.from_numpy(out), torch.from_numpy(padding)


def sinusoidal_positions(n_tokens, width):
    """The ``(n_tokens, width)`` table of "Attention is all you need"."""
    position = torch.arange(n_tokens, dtype=torch.float32)[:, None]
    frequency = torch.exp(
        torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width)
    )
    table = torch.zeros(n_tokens, width)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class EncoderNet(nn.Module):
    """Projection, positions, one encoder layer, masked mean pooling, linear head."""

    def __init__(self, n_features, n_outputs, d_model, n_heads, dim_feedforward):
        super().__init__()
        self.d_model = d_model
        self.projection = nn.Linear(n_features, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model=d_model,
            nhead=n_heads,
            dim_feedforward=dim_feedforward,
            dropout=0.1,
            batch_first=True,
        )
        # enable_nested_tensor=False: the nested-tensor path only runs in eval
        # mode with a mask; this keeps one code path (and no warning)
        self.encoder = nn.TransformerEncoder(
            layer, num_layers=1, enable_nested_tensor=False
        )
        self.head = nn.Linear(d_model, n_outputs)

    def forward(self, x, padding):
        h = self.projection(x) + sinusoidal_positions(x.shape[1], self.d_model)
        # no mask when every token is valid: lets torch use its fused kernels
        h = self.encoder(h, src_key_padding_mask=padding if padding.any() else None)
        valid = (~padding).unsqueeze(-1).to(h.dtype)
        pooled = (h * valid).sum(1) / valid.sum(1)
        return self.head(pooled)


class _TorchEncoder(BaseEstimator):
    def __init__(
        self,
        d_model=64,
        n_heads=4,
        dim_feedforward=128,
        learning_rate=1e-3,
        batch_size=32,
        max_epochs=200,
        patience=20,
        validation_fraction=0.1,
        random_state=0,
    ):
        self.d_model = d_model
        self.n_heads = n_heads
        self.dim_feedforward = dim_feedforward
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def _standardise(self, sequences):
        return [(seq - self.mean_) / self.scale_ for seq in sequences]

    def _batches(self, sequences, targets, shuffle, generator):
        order = (
            torch.randperm(len(sequences), generator=generator).numpy()
            if shuffle
            else np.arange(len(sequences))
        )
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            x, padding = pad([sequences[i] for i in index])
            yield x, padding, (None if targets is None else targets[index])

    def _fit(self, X, targets, n_outputs, loss, stratify):
        torch.manual_seed(self.random_state)
        generator = torch.Generator().manual_seed(self.random_state)
        sequences = as_sequences(X)
        tokens = np.concatenate(sequences)
        self.mean_ = tokens.mean(axis=0)
        self.scale_ = tokens.std(axis=0) + 1e-8
        sequences = self._standardise(sequences)
        try:
            train, valid = train_test_split(
                np.arange(len(sequences)),
                test_size=self.validation_fraction,
                stratify=stratify,
                random_state=self.random_state,
            )
        except ValueError:  # fewer validation samples than classes
            train, valid = train_test_split(
                np.arange(len(sequences)),
                test_size=self.validation_fraction,
                random_state=self.random_state,
            )
        seq_train = [sequences[i] for i in train]
        seq_valid = [sequences[i] for i in valid]
        self.net_ = EncoderNet(
            sequences[0].shape[1],
            n_outputs,
            self.d_model,
            self.n_heads,
            self.dim_feedforward,
        )
        optimizer = torch.optim.Adam(self.net_.parameters(), lr=self.learning_rate)
        best_loss, best_state, waited = np.inf, None, 0
        self.n_epochs_ = 0
        while self.n_epochs_ < self.max_epochs:
            self.n_epochs_ += 1
            self.net_.train()
            for x, padding, target in self._batches(
                seq_train, targets[train], True, generator
            ):
                optimizer.zero_grad()
                loss(self.net_(x, padding), target).backward()
                optimizer.step()
            self.net_.eval()
            with torch.inference_mode():
                valid_loss = sum(
                    loss(self.net_(x, padding), target).item() * len(x)
                    for x, padding, target in self._batches(
                        seq_valid, targets[valid], False, None
                    )
                ) / len(valid)
            if valid_loss < best_loss:
                best_loss, waited = valid_loss, 0
                best_state = copy.deepcopy(self.net_.state_dict())
            else:
                waited += 1
                if waited >= self.patience:
                    break
        self.net_.load_state_dict(best_state)
        self.best_validation_loss_ = best_loss
        return self

    def _forward(self, X):
        sequences = self._standardise(as_sequences(X))
        self.net_.eval()
        with torch.inference_mode():
            return torch.cat(
                [
                    self.net_(x, padding)
                    for x, padding, _ in self._batches(sequences, None, False, None)
                ]
            ).numpy()


class TorchEncoderClassifier(ClassifierMixin, _TorchEncoder):
    """One-layer transformer encoder classifier (see the module docstring)."""

    def fit(self, X, y):
        self.encoder_ = LabelEncoder().fit(y)
        self.classes_ = self.encoder_.classes_
        codes = torch.as_tensor(self.encoder_.transform(y), dtype=torch.long)
        return self._fit(
            X, codes, len(self.classes_), nn.functional.cross_entropy, stratify=y
        )

    def predict(self, X):
        return self.classes_[self._forward(X).argmax(axis=1)]


class TorchEncoderRegressor(RegressorMixin, _TorchEncoder):
    """One-layer transformer encoder regressor on the standardised target."""

    def fit(self, X, y):
        y = np.asarray(y, dtype=np.float32)
        self.y_mean_, self.y_scale_ = y.mean(), y.std() + 1e-8
        target = torch.as_tensor((y - self.y_mean_) / self.y_scale_)[:, None]
        return self._fit(X, target, 1, nn.functional.mse_loss, stratify=None)

    def predict(self, X):
        return self._forward(X)[:, 0] * self.y_scale_ + self.y_mean_
