"""Learning the model's parameters from y.

``loss`` holds the objective both solvers minimise, ``adam`` and ``lbfgs`` the
solvers (``optimizers``: Adam's update of the parameters), ``head`` the linear
head fitted on the trained model's outputs, ``state`` what a fit keeps (the
fitted model and its history), ``callbacks`` scikit-learn's fit progress. The
solvers receive the model, its parameters and a training set, and return what
they learned: none reads or writes an estimator.
"""
