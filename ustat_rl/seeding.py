"""One way to derive independent random streams: ``child_seed(seed, *key)``.

Every sampler, sweep and check derives its streams from a root seed and a key (a block index, a
cell, a run), so results do not depend on the order or the number of workers that compute them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["child_seed", "child_rng", "child_int"]


def child_seed(seed, *key: int) -> np.random.SeedSequence:
    """The stream ``key`` below ``seed``: ``SeedSequence(entropy, spawn_key=parent_key + key)``.

    ``seed`` is an int or a :class:`numpy.random.SeedSequence`; for an int this equals
    ``SeedSequence(seed, spawn_key=key)``.

    Examples
    --------
    >>> child_seed(7, 1, 2).spawn_key
    (1, 2)
    >>> child_seed(child_seed(7, 1), 2).generate_state(1) == child_seed(7, 1, 2).generate_state(1)
    array([ True])
    """
    if isinstance(seed, (bool, np.bool_)):
        raise TypeError(f"`seed` must be an integer or SeedSequence, got {seed!r}")
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return np.random.SeedSequence(entropy=root.entropy,
                                  spawn_key=tuple(root.spawn_key) + tuple(int(k) for k in key))


def child_rng(seed, *key: int) -> np.random.Generator:
    """A numpy ``Generator`` on the stream :func:`child_seed` ``(seed, *key)``."""
    return np.random.default_rng(child_seed(seed, *key))


def child_int(seed, *key: int) -> int:
    """A 32-bit integer seed from the stream (for ``torch.Generator.manual_seed``)."""
    return int(child_seed(seed, *key).generate_state(1)[0])
