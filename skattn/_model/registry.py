"""Registries: the values an architectural option takes, each with its unit.

A :class:`Registry` maps each value of one option of the estimators
(``positional_encoding``, ``pooling``, ``activation``, ``feed_forward``,
``layer_norm``) to what the model builds for it and a one-line description.
The registry is the one
list of the option's values: :func:`~skattn._model.model.build_model` looks the
units up in it, the estimators' parameter constraints, the documentation of
the parameter and the check of a fitted model's structure read it, and an
unknown value fails in :meth:`Registry.get` with the list of the known ones.
The registries themselves are in ``options.py``, the poolings' in
``pooling.py``.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause


class Registry:
    """The values of one option of the model, in the order they are documented.

    Parameters
    ----------
    option : str
        Name of the option: the estimators' parameter and the field of
        :class:`~skattn._model.model.ModelConfig`.
    """

    def __init__(self, option):
        self.option = option
        self._entries = {}

    def add(self, name, value, description):
        """Register ``value`` under ``name`` (a str, or None for the option's
        "none"); returns the registry.

        Parameters
        ----------
        name : str or None
        value : object
            What the model builds for ``name``: a unit class, a function, a
            description of a placement.
        description : str
            One sentence for the parameter's documentation.
        """
        if name in self._entries:
            raise ValueError(f"{self.option}={name!r} is registered twice.")
        self._entries[name] = (value, description)
        return self

    def names(self):
        """The registered string values, in order (None excluded)."""
        return [name for name in self._entries if name is not None]

    def allows_none(self):
        """Whether None is a value of the option."""
        return None in self._entries

    def get(self, name):
        """The value registered under ``name``.

        Raises
        ------
        ValueError
            For an unregistered ``name``, listing the registered ones.
        """
        if name not in self._entries:  # hashable names only reach here
            known = ", ".join(repr(known) for known in self._entries)
            raise ValueError(
                f"{self.option}={name!r} is not one of the known values: {known}."
            )
        return self._entries[name][0]

    def name_of(self, value):
        """The name ``value`` is registered under.

        Raises
        ------
        ValueError
            For an unregistered ``value``.
        """
        for name, (registered, _) in self._entries.items():
            if registered is value:
                return name
        raise ValueError(f"{value!r} is not a registered {self.option}.")

    def values(self):
        """The registered values, in order (that of None excluded)."""
        return [self._entries[name][0] for name in self.names()]

    def items(self):
        """``(name, value, description)`` of each entry, in order."""
        return [(name, *entry) for name, entry in self._entries.items()]

    def choices(self):
        """The values as a numpydoc type: ``{"a", "b"} or None``."""
        text = "{" + ", ".join(f'"{name}"' for name in self.names()) + "}"
        return text + " or None" if self.allows_none() else text

    def descriptions(self):
        """The values with their descriptions, ``"name": description`` (``None:
        description``), in order.

        Returns
        -------
        list of str
        """
        lines = []
        for name, (_, description) in self._entries.items():
            label = "None" if name is None else f'"{name}"'
            lines.append(f"``{label}``: {description}")
        return lines
