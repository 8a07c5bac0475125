"""Which benchmark sets tune the defaults and which confirm them.

The rule depends on the sets' names alone, never on a result (see "Tuning and
confirmation sets" in ``benchmarks/README.md``): within each kind (series,
tables, text corpora), the sets in the order of the SHA-256 of their names
alternate, the first a tuning set. The variants of one corpus (``20ng-ctx``,
``20ng-static``, ``20ng-small``) share its role. The roles of the sets that
exist are frozen in ``ROLES`` below, as the rule made them; a set added later
is a confirmation set when the first hexadecimal digit of the SHA-256 of its
name is 0-7, a tuning set otherwise (``role_of_new_set``), so that adding a
set never moves another. The sets added later that share the texts of one
corpus (``reuters-r8`` and ``reuters-r52``; ``slo-sentiment`` and
``slo-topic``) take the role of the corpus, the part of their name before the
first hyphen, so that no text is both tuned on and confirmed on; ``ADDED``
lists them.

The UCR 2018 archive's univariate sets from A to P whose series have at least
250 points (the longest series of a set of unequal lengths), which
``benchmarks/ucr.py`` reads, are listed in ``ADDED["series"]`` by corpus too.
The seven of them the benchmark had before (``acsf1``, ``arrowhead``,
``osuleaf``, ``pickup``, ``coffee``, ``plaid``, ``pigcvp``) keep their roles.
Sets that hold the same series (one recording split twice, as
FreezerRegularTrain and FreezerSmallTrain; labelled twice, as the DodgerLoop
sets; PickupGestureWiimoteZ within AllGestureWiimoteZ) or the same recordings
by other sensors (the axes of CricketX, Y and Z, of AllGestureWiimote and
GestureMidAir; two leads, two eye channels, a pig's three pressures) are one
corpus, with the role of its set that had one, else ``role_of_new_set`` of its
first name in alphabetical order; every other set is its own corpus, of
``role_of_new_set`` of its name. The roles were fixed so, and committed,
before any method ran on these sets. ``corpus`` reads a set's corpus from
``ADDED`` first, then from the part of its name before the first hyphen.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import hashlib

# The sets the split was made of: a set added later is not listed here (its
# role is role_of_new_set's), so that the roles below never move.
KINDS = {
    "series": [
        "acsf1", "arrowhead", "basicmotions", "cardano", "covid", "gunpoint",
        "italypower", "japanesevowels", "osuleaf", "pickup", "tecator",
    ],
    "tables": ["breast-cancer", "digits", "wine"],
    "text": ["20ng", "tweets"],
}  # fmt: skip

# The sets of the UCR archive (benchmarks/ucr.py) that share no series and no
# recording with another set: a corpus each.
ARCHIVE_OWN_CORPUS = (
    "beef", "beetlefly", "birdchicken", "car", "cincecgtorso", "computers",
    "diatomsizereduction", "earthquakes", "ethanollevel", "facefour",
    "fiftywords", "fish", "forda", "fordb", "ham", "handoutlines",
    "haptics", "herring", "housetwenty", "inlineskate",
    "insectwingbeatsound", "largekitchenappliances", "lightning2",
    "lightning7", "mallat", "meat", "oliveoil", "phoneme",
)  # fmt: skip

# The sets added after the split, by kind and corpus: each takes the role of
# the corpus it is listed under (the split's role of that name where it has one,
# as pickup, else role_of_new_set of the name). Their roles were fixed by this
# rule before any method ran on them.
ADDED = {
    "series": {
        "plaid": ["plaid"],
        "coffee": ["coffee"],
        "pigcvp": ["pigcvp", "pigairwaypressure", "pigartpressure"],  # the same pigs
        "trace": ["trace"],  # tslearn's
        # the UCR archive's sets of benchmarks/ucr.py: those that share series
        # or recordings, then those of their own corpus
        "pickup": ["allgesturewiimotex", "allgesturewiimotey", "allgesturewiimotez"],
        "cricketx": ["cricketx", "crickety", "cricketz"],
        "dodgerloopday": ["dodgerloopday", "dodgerloopgame", "dodgerloopweekend"],
        "eoghorizontalsignal": ["eoghorizontalsignal", "eogverticalsignal"],
        "freezerregulartrain": ["freezerregulartrain", "freezersmalltrain"],
        "gesturemidaird1": ["gesturemidaird1", "gesturemidaird2", "gesturemidaird3"],
        "gesturepebblez1": ["gesturepebblez1", "gesturepebblez2"],
        "insectepgregulartrain": ["insectepgregulartrain", "insectepgsmalltrain"],
        "mixedshapesregulartrain": ["mixedshapesregulartrain", "mixedshapessmalltrain"],
        "noninvasivefetalecgthorax1": [
            "noninvasivefetalecgthorax1",
            "noninvasivefetalecgthorax2",
        ],
        **{name: [name] for name in ARCHIVE_OWN_CORPUS},
    },
    "tables": {  # of targets: scikit-learn's, then statsmodels'
        "diabetes": ["diabetes"],
        "star98": ["star98"],
        "fair": ["fair"],
        "randhie": ["randhie"],
        "anes96": ["anes96"],  # statsmodels' of classes
    },
    "text": {
        "books": ["books"],  # book-excerpts.tab
        "friends": ["friends"],  # friends-transcripts.tab
        "reuters": ["reuters-r8", "reuters-r52"],  # R8's texts are within R52
        "slo": ["slo-sentiment", "slo-topic"],  # the same comments
        "bbc": ["bbc-news"],  # BBC News articles by topic (Greene and Cunningham)
        "c50": ["c50-authors"],  # Reuter_50_50: RCV1 stories by author
    },
}

# Corpora given a role outside the rule: the two long-document corpora were
# added as tuning sets, because every long-document corpus the rule had placed
# (20 Newsgroups, Reuters, the book excerpts) is a confirmation set, which
# left no long texts to choose a default on.
FIXED_ROLES = {"bbc": "tuning", "c50": "tuning"}


def _digest(name):
    return hashlib.sha256(name.encode()).hexdigest()


def split(kinds=KINDS):
    """The role of each set by the rule: ``{name: "tuning" or "confirmation"}``."""
    roles = {}
    for names in kinds.values():
        for index, name in enumerate(sorted(names, key=_digest)):
            roles[name] = "tuning" if index % 2 == 0 else "confirmation"
    return roles


def role_of_new_set(name):
    """The role of a set added after the split was frozen."""
    return "confirmation" if int(_digest(name)[0], 16) < 8 else "tuning"


ROLES = split()


# set -> its corpus, for the sets added after the split
CORPORA = {
    name: base
    for corpora in ADDED.values()
    for base, names in corpora.items()
    for name in names
}


def corpus(dataset):
    """The name a set's role is read from: the set's own when the split has
    it (``breast-cancer``), else its corpus in ``ADDED`` (``crickety`` is
    cricketx's), else the part of its name before the first hyphen
    (``20ng-ctx`` and ``20ng-small`` are 20ng's)."""
    if dataset in ROLES:
        return dataset
    return CORPORA.get(dataset, dataset.split("-")[0])


def listed(dataset):
    """Whether ``dataset`` is a set of the split or of ``ADDED``."""
    return dataset in ROLES or dataset in CORPORA


def role(dataset):
    """The role of a benchmark data set, by the name of its corpus or set."""
    base = corpus(dataset)
    if base in FIXED_ROLES:
        return FIXED_ROLES[base]
    if base not in ROLES:
        return role_of_new_set(base)
    return ROLES[base]


def datasets_of(role_name, datasets):
    """The names of ``datasets`` whose role is ``role_name``."""
    return [name for name in datasets if role(name) == role_name]


if __name__ == "__main__":
    for kind, names in KINDS.items():
        for name in sorted(names, key=_digest):
            print(f"{kind:7} {name:15} {_digest(name)[:8]} {ROLES[name]}")
    for kind, corpora in ADDED.items():
        for base, names in corpora.items():
            for name in names:
                print(
                    f"{kind:7} {name:15} {_digest(base)[:8]} {role(name)} "
                    f"(added later; corpus {base})"
                )
