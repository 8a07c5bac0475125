"""The process-wide cache of the token states TokenEmbeddings computes."""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

import threading
import uuid
import weakref
from collections import OrderedDict, namedtuple

# The token states TokenEmbeddings computed, by fitted model, length and text:
# a grid search re-embeds no text its folds and candidates share. At most
# CACHE_BYTES in all; the texts used least recently go first.
CACHE_BYTES = 2**30


CacheInfo = namedtuple("CacheInfo", "hits misses n_texts n_bytes max_bytes")


class _TokenStateCache:
    """A process-wide cache of token states, bounded in bytes (LRU)."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self._entries = OrderedDict()  # (namespace, text) -> array
        self._n_bytes = 0
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        self._object_keys = weakref.WeakKeyDictionary()  # model object -> key

    def namespace(self, model, max_length):
        """The key of a loaded model (the object that encodes) and length."""
        with self._lock:
            key = self._object_keys.setdefault(model, uuid.uuid4().hex)
        return key, max_length

    def get_many(self, namespace, texts):
        """The states kept of each text (None where none are), counting a miss
        per distinct text not kept (the texts to encode) and a hit per other."""
        with self._lock:
            out = [self._entries.get((namespace, text)) for text in texts]
            for text, value in zip(texts, out, strict=True):
                if value is not None:
                    self._entries.move_to_end((namespace, text))
            n_missing = len({t for t, v in zip(texts, out, strict=True) if v is None})
            self.misses += n_missing
            self.hits += len(texts) - n_missing
            return out

    def put(self, namespace, text, value):
        if value.nbytes > self.max_bytes:
            return
        with self._lock:
            key = (namespace, text)
            if key in self._entries:
                return
            self._entries[key] = value
            self._n_bytes += value.nbytes
            while self._n_bytes > self.max_bytes:
                _, old = self._entries.popitem(last=False)
                self._n_bytes -= old.nbytes

    def clear(self):
        with self._lock:
            self._entries.clear()
            self._n_bytes = 0
            self.hits = self.misses = 0

    def info(self):
        with self._lock:
            return CacheInfo(
                self.hits, self.misses, len(self._entries), self._n_bytes,
                self.max_bytes,
            )  # fmt: skip


_CACHE = _TokenStateCache(CACHE_BYTES)
