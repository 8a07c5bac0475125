"""Reading what the caller passes: input formats, parameter and array checks,
targets and their encodings.

- ``formats``: X, raw input to checked sequences of tokens, and the input
  format an estimator records in ``fit``.
- ``targets``: y and the sample and class weights as the loss reads them, and
  the encodings of y.
- ``validation``: checks of parameters, targets, weights and outputs with
  clear errors, and scikit-learn's parameter validation.

Support of the estimators, below training: nothing here trains a model.
"""
