"""Variants of the learned default over seeds, learning-rate schedules included.

Fits the default pipeline of ``realdata.py``'s ``attention`` method
(``AttentionTransformer`` then a logistic regression, or ``RidgeCV`` for
Tecator) once per data set and seed, in this process and at one thread count,
and prints test accuracy (R² for Tecator), fit seconds and the epochs run, then
a table of the means over the seeds. ``--set NAME=VALUE`` changes a parameter
of the ``AttentionTransformer``, as in ``realdata.py``.

``--schedule cosine`` tries a learning-rate schedule that skattn does not have
(it did not win: see "The learned default: schedules, L-BFGS, depth, weight decay
and patience" in ``benchmarks/README.md``): every Adam step is taken at
``learning_rate_init`` times ``(1 + cos(pi * t / T)) / 2``, where ``t`` counts
the steps made and ``T = max_iter * ceil(n_train / batch_size)`` is the steps
the fit would make without stopping early; ``--warmup F`` multiplies the first
``F * T`` steps by ``(t + 1) / (F * T)`` as well. The schedule patches the
package's private optimizer and training loop in this process only.

Run from the repository root, in the benchmark environment, after
``realdata.py --prepare``::

    PYTHONPATH=.:benchmarks ~/.venvs/skattn-bench/bin/python \\
        benchmarks/learned_variants.py --datasets gunpoint,arrowhead \\
        --seeds 0,1,2 --schedule cosine --warmup 0.1 \\
        --set max_iter=100 --set learning_rate_init=0.003
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import json
import math
import time
import warnings

import numpy as np
from realdata import (
    DATASETS,
    attention,
    cache_dir,
    comma_list,
    parse_set,
)
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

import skattn._estimators.base
import skattn._training.adam
import skattn._training.optimizers

SCHEDULE = {"name": "constant", "warmup": 0.0, "max_iter": 1, "total_steps": 1}


def schedule_factor(step):
    """The multiplier of ``learning_rate_init`` for the step after ``step`` steps."""
    total = SCHEDULE["total_steps"]
    fraction = step / total
    factor = 1.0
    if SCHEDULE["name"] == "cosine":
        factor = 0.5 * (1.0 + math.cos(math.pi * min(fraction, 1.0)))
    warmup = SCHEDULE["warmup"]
    if warmup and fraction < warmup:
        factor *= (step + 1) / (warmup * total)
    return factor


def install_schedule():
    """Patch Adam's step and the training loop of this process (see the module
    docstring); the constant schedule leaves the package as it is."""
    update_params = skattn._training.optimizers.AdamOptimizer.update_params
    fit_adam = skattn._training.adam.fit_adam
    gen_batches = skattn._training.adam.gen_batches

    def scheduled_update_params(self, params, grads):
        initial = self.state["learning_rate_init"]
        self.state["learning_rate_init"] = initial * schedule_factor(self.state["t"])
        try:
            update_params(self, params, grads)
        finally:
            self.state["learning_rate_init"] = initial

    def counting_fit_adam(model, params, data, settings, **kwargs):
        SCHEDULE.update(max_iter=settings.max_iter, total_steps=None)
        return fit_adam(model, params, data, settings, **kwargs)

    def counting_gen_batches(n_train, batch_size, **kwargs):
        # the training loop's own minibatches of its first epoch, before any step
        if SCHEDULE["total_steps"] is None:
            steps_per_epoch = math.ceil(n_train / batch_size)
            SCHEDULE["total_steps"] = SCHEDULE["max_iter"] * steps_per_epoch
        return gen_batches(n_train, batch_size, **kwargs)

    skattn._training.optimizers.AdamOptimizer.update_params = scheduled_update_params
    skattn._estimators.base.fit_adam = counting_fit_adam
    skattn._training.adam.gen_batches = counting_gen_batches


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--datasets",
        type=comma_list(list(DATASETS)),
        default=["digits", "italypower", "gunpoint", "arrowhead"],
        metavar="A,B",
        help=f"among {', '.join(DATASETS)}",
    )
    parser.add_argument("--seeds", default="0", help="random_state values, 0,1,2")
    parser.add_argument(
        "--schedule", choices=["constant", "cosine"], default="constant"
    )
    parser.add_argument("--warmup", type=float, default=0.0, help="fraction of steps")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", help="data cache, as in realdata.py")
    parser.add_argument("--json", metavar="FILE", help="append one line per fit")
    args = parser.parse_args(argv)
    params = parse_set(parser, args.set)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    SCHEDULE.update(name=args.schedule, warmup=args.warmup)
    if args.schedule != "constant" or args.warmup:
        install_schedule()
    print(f"schedule {args.schedule}, warm-up {args.warmup}, parameters {params}")

    means = {}
    for name in args.datasets:
        data = DATASETS[name](name, cache_dir(args))
        scores, fits = [], []
        for seed in seeds:
            with threadpool_limits(args.threads), warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = attention(data, {**params, "random_state": seed}, args.threads)
                start = time.perf_counter()
                model.fit(data.X_train, data.y_train)
                fit = time.perf_counter() - start
                score = model.score(data.X_test, data.y_test)
            epochs = model.named_steps["attentiontransformer"].n_iter_
            print(f"{name} seed {seed}: {score:.4f} in {fit:.2f} s, {epochs} epochs")
            scores.append(score)
            fits.append(fit)
            if args.json:
                record = dict(
                    dataset=name,
                    seed=seed,
                    score=score,
                    fit=fit,
                    epochs=epochs,
                    schedule=args.schedule,
                    warmup=args.warmup,
                    params={key: repr(value) for key, value in params.items()},
                )
                with open(args.json, "a") as file:
                    file.write(json.dumps(record) + "\n")
        means[name] = (np.mean(scores), np.mean(fits))
    print(f"\nmeans over seeds {seeds}:")
    print("| data set | score | fit s |")
    print("|---|---:|---:|")
    for name, (score, fit) in means.items():
        print(f"| {name} | {score:.3f} | {fit:.2f} |")


if __name__ == "__main__":
    main()
