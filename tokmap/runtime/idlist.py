"""Python lists of ids from numpy id arrays, sharing one int object per id.

`array.tolist()` makes a new int object for every id above 256: 12 ms for Llama 2's 437K ids of
wagahai.txt, a quarter of the call. Taking each id's object from a table made once (id -> int)
costs 7 ms, and the lists then hold shared objects. The table costs ~13 ns an id to make and
saves ~11 ns an id taken, so it is made once an array at least its size comes along (a cold call
on a 262K vocabulary gains nothing from it); shorter arrays before that use tolist. With
eager=True the table is made on first use whatever the array (encode_batch's worker pool, whose
table serves every chunk of every batch).
"""

from __future__ import annotations

import numpy as np


class IdLists:
    def __init__(self, size: int, eager: bool = False):
        self.size = size  # ids are below it
        self.dtype = np.int32 if size <= 1 << 31 else np.int64  # enough for every id
        self.eager = eager
        self._objs = None

    def objects(self, ids: np.ndarray) -> np.ndarray:
        """ids (integers in [0, size)) as an object array of the shared ints, when the table is
        made or due (the rule of tolist), else ids as they are: a caller that cuts them into
        many lists or tuples then copies references instead of making ints."""
        objs = self._objs
        if objs is None:
            if len(ids) < self.size and not self.eager:
                return ids
            objs = self._objs = np.arange(self.size, dtype=np.int64).astype(object)
        return np.take(objs, ids)

    def tolist(self, ids: np.ndarray) -> list[int]:
        """ids (integers in [0, size)) as a list of ints."""
        objs = self._objs
        if objs is None:
            if len(ids) < self.size and not self.eager:
                return ids.tolist()
            objs = self._objs = np.arange(self.size, dtype=np.int64).astype(object)
        # np.take, not objs[ids]: indexing converts a uint32 index array to intp first (600K ids:
        # 12 against 16 ms with the tolist).
        return np.take(objs, ids).tolist()
