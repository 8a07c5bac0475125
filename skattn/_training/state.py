"""What training has done so far (:class:`History`)."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import dataclasses
import math


@dataclasses.dataclass
class History:
    """What training has done so far: the estimator's training attributes.

    The solvers update it, epoch by epoch; the estimator reads it into its
    attributes (``n_iter_``, ``loss_curve_``, ...) and back, so that a warm
    start, a ``partial_fit`` and the blocked fit of a dask array go on from
    the same record.
    """

    n_iter: int = 0
    t: int = 0
    loss: float | None = None
    loss_curve: list = dataclasses.field(default_factory=list)
    best_loss: float = math.inf
    validation_scores: list | None = None
    validation_loss_curve: list | None = None
    best_validation_score: float | None = None
    no_improvement_count: int = 0

    # field -> fitted attribute
    ATTRIBUTES = {
        "n_iter": "n_iter_",
        "t": "t_",
        "loss": "loss_",
        "loss_curve": "loss_curve_",
        "best_loss": "best_loss_",
        "validation_scores": "validation_scores_",
        "validation_loss_curve": "validation_loss_curve_",
        "best_validation_score": "best_validation_score_",
        "no_improvement_count": "_no_improvement_count",
    }

    @classmethod
    def read(cls, estimator):
        """The history of a fitted estimator (a copy: the lists too)."""
        values = {
            field: getattr(estimator, attribute)
            for field, attribute in cls.ATTRIBUTES.items()
        }
        return cls(**values).copy()

    def write(self, estimator):
        """Set the estimator's training attributes (copies of the lists)."""
        for field, value in dataclasses.asdict(self.copy()).items():
            setattr(estimator, self.ATTRIBUTES[field], value)

    def copy(self):
        """A copy whose lists are new."""
        return dataclasses.replace(
            self,
            loss_curve=list(self.loss_curve),
            validation_scores=_copy_list(self.validation_scores),
            validation_loss_curve=_copy_list(self.validation_loss_curve),
        )

    def assign(self, other):
        """Make this history a copy of ``other`` (in place)."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(other.copy(), field.name))

    def start_validation(self):
        """Record validation scores from now on (early stopping is on)."""
        if self.validation_scores is None:
            self.validation_scores, self.best_validation_score = [], -math.inf
        if self.validation_loss_curve is None:
            self.validation_loss_curve = []

    def end_epoch(self, loss, n_samples, tol, score=None, validation_loss=None):
        """Record an epoch's training loss (and validation score and loss).

        Returns
        -------
        best : bool
            Whether ``score`` is above every validation score before it.
        """
        self.n_iter += 1
        self.t += n_samples
        self.loss = loss
        self.loss_curve.append(loss)
        best = False
        if score is not None:
            best = score > self.best_validation_score
            self.validation_scores.append(score)
            self.validation_loss_curve.append(validation_loss)
            if score < self.best_validation_score + tol:
                self.no_improvement_count += 1
            else:
                self.no_improvement_count = 0
            self.best_validation_score = max(self.best_validation_score, score)
        elif loss > self.best_loss - tol:
            self.no_improvement_count += 1
        else:
            self.no_improvement_count = 0
        self.best_loss = min(self.best_loss, loss)
        return best


def _copy_list(values):
    return None if values is None else list(values)
