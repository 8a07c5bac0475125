"""Stochastic optimizer for the minibatch solver.

Like scikit-learn's ``neural_network/_stochastic_optimizers.py``, but on dicts
of named parameter arrays, updated in place. Pure numpy.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import math

import numpy as np

from .._model.units import SparseRows


class AdamOptimizer:
    """Adam (Kingma & Ba, 2015) with bias correction.

    Parameters
    ----------
    params : dict of str to ndarray
        The parameters to optimise; only their shapes and dtypes are read here.
    learning_rate_init : float, default=0.001
        Step size.
    beta_1, beta_2 : float, default=0.9, 0.999
        Decay rates of the first and second moment estimates.
    epsilon : float, default=1e-8
        Numerical stability term; at least the smallest normal number of the
        parameters' dtype (1.2e-38 in float32): a smaller one rounds to zero
        (or loses its digits) there, and a step of a zero moment is then 0/0.

    Raises
    ------
    ValueError
        For an ``epsilon`` below the smallest normal number of the dtype.

    Attributes
    ----------
    state : dict
        Everything the optimizer holds, as plain Python numbers and numpy
        arrays: ``"t"`` (number of updates made), ``"ms"`` and ``"vs"`` (dicts
        of str to ndarray, the first and second moment estimates) and the
        hyper-parameters. An estimator keeps this dict, not the optimizer, so
        that a fitted estimator holds no private type (``skops.io.load`` needs
        to trust only the public estimators); :meth:`from_state` continues
        from it. Updated in place.
    t : int
        Number of updates made.
    ms, vs : dict of str to ndarray
        First and second moment estimates.
    """

    def __init__(
        self, params, learning_rate_init=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8
    ):
        dtype = next(iter(params.values())).dtype if params else np.dtype(np.float64)
        if epsilon < np.finfo(dtype).tiny:
            raise ValueError(
                f"epsilon={epsilon} is below the smallest normal {dtype} number, "
                f"{np.finfo(dtype).tiny:.3g}: Adam computes in {dtype}, where it "
                "rounds to zero and a step of a zero moment is 0/0 (NaN weights). "
                "Pass a larger epsilon (the default is 1e-8)."
            )
        self.state = {
            "t": 0,
            "ms": {name: np.zeros_like(value) for name, value in params.items()},
            "vs": {name: np.zeros_like(value) for name, value in params.items()},
            "learning_rate_init": learning_rate_init,
            "beta_1": beta_1,
            "beta_2": beta_2,
            "epsilon": epsilon,
        }

    @classmethod
    def from_state(cls, state):
        """The optimizer that continues from ``state`` (updated in place).

        Parameters
        ----------
        state : dict
            The ``state`` of an optimizer, as built by the constructor.

        Returns
        -------
        optimizer : AdamOptimizer
        """
        optimizer = cls.__new__(cls)
        optimizer.state = state
        return optimizer

    @property
    def t(self):
        return self.state["t"]

    @property
    def ms(self):
        return self.state["ms"]

    @property
    def vs(self):
        return self.state["vs"]

    def update_params(self, params, grads):
        """Take one Adam step on ``params`` in place.

        Parameters
        ----------
        params : dict of str to ndarray
            Parameters, modified in place.
        grads : dict of str to ndarray or SparseRows
            Gradients, same keys and shapes; the rows of a table in a
            :class:`~skattn._model.units.SparseRows`.
        """
        state = self.state
        state["t"] = t = state["t"] + 1
        beta_1, beta_2 = state["beta_1"], state["beta_2"]
        # bias-corrected step size, as in scikit-learn's AdamOptimizer
        learning_rate = (
            state["learning_rate_init"] * math.sqrt(1 - beta_2**t) / (1 - beta_1**t)
        )
        for name, grad in grads.items():
            m, v, param = state["ms"][name], state["vs"][name], params[name]
            if isinstance(grad, SparseRows):
                # a table's rows in the batch: their moments and values only,
                # as torch's SparseAdam (the other rows wait, unchanged)
                rows, grad = grad.coalesced()
                m, v, param = m[rows], v[rows], param[rows]
            m *= beta_1
            m += (1 - beta_1) * grad
            v *= beta_2
            with np.errstate(over="ignore"):  # the solver raises on an inf moment
                v += (1 - beta_2) * (grad * grad)
            param -= (learning_rate * m / (np.sqrt(v) + state["epsilon"])).astype(
                param.dtype, copy=False
            )
            if param is not params[name]:  # rows of a table: copies, put back
                state["ms"][name][rows] = m
                state["vs"][name][rows] = v
                params[name][rows] = param
