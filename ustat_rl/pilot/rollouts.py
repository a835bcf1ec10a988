"""A practitioner's pilot sample: rewards and per-sample scores, grouped by prompt.

:class:`Rollouts` is the one input of the pilot tools (:mod:`ustat_rl.pilot.estimate`,
:mod:`ustat_rl.pilot.uncertainty` and ``ustat-rl gstar``): for each of ``n`` sampled outputs, the
group (prompt) it belongs to, its reward ``Z`` and its score ``W = grad log pi(Y | X)``, or a
random projection ``R W`` of it (docs/theory.md section 7). It is validated once, on
construction, and saved to or loaded from ``.npz`` or Parquet with the same field names.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

__all__ = ["Rollouts", "SKETCH_KINDS", "MIN_GROUP_SIZE", "ROLLOUT_SUFFIXES", "load_rollouts",
           "check_rollouts_path", "read_npz"]

#: ``"none"``: ``score`` holds the full per-sample score ``W``; ``"gaussian"``/``"rademacher"``:
#: ``score = R W`` with i.i.d. rows of ``R`` scaled so that ``E[R^T R] = I``.
SKETCH_KINDS = ("none", "gaussian", "rademacher")

#: The unbiased kernels of docs/theory.md section 7 have order 3, so each group needs three
#: distinct samples.
MIN_GROUP_SIZE = 3

#: File formats, chosen by suffix.
ROLLOUT_SUFFIXES = (".npz", ".parquet")

_META_FIELDS = ("sketch_kind", "sketch_seed", "param_dim", "model_name", "sketch_blocks",
                "sketch_route")


@dataclass(frozen=True)
class Rollouts:
    """Pilot rollouts: one row per sampled output (docs/theory.md section 7).

    Attributes
    ----------
    prompt_id : ndarray (n,) of int or str
        The group each sample belongs to. Groups are i.i.d. prompt draws from ``f`` (when one
        prompt is drawn twice, give the two groups different ids) unless ``prompt_weight`` is set.
        Groups may have different sizes, each at least :data:`MIN_GROUP_SIZE`.
    reward : ndarray (n,)
        The reward ``Z`` of each sample.
    score : ndarray (n, k)
        The score ``W`` (``sketch_kind="none"``, ``k = d``) or its projection ``R W`` with a
        ``(k, d)`` matrix ``R`` shared by all samples, independent of them, with i.i.d. rows (or
        ``sketch_blocks`` i.i.d. blocks of rows) and ``E[R^T R] = I``.
    prompt_weight : ndarray (n,), optional
        ``f(x)`` of the sample's prompt, constant within a group and positive: the groups are
        then a fixed, complete prompt set with these (renormalised) weights rather than i.i.d.
        draws.
    sketch_kind : {"none", "gaussian", "rademacher"}
        How ``score`` was produced.
    sketch_seed : int, optional
        Seed of ``R`` (metadata, for reproducing the projection).
    param_dim : int, optional
        ``d``, the dimension of the full score (metadata).
    model_name : str
        The policy the pilot came from (metadata).
    sketch_blocks : int, optional
        ``m``: the columns form ``m`` independent, equally sized, contiguous blocks (a factored
        sketch, :mod:`ustat_rl.scores.factored`), whose columns are not independent inside a block;
        ``None`` (the default) for i.i.d. rows of ``R``, one block per column.
    sketch_route : str
        How the scores were computed (``"full"``, ``"dense"``, ``"factored"``, ``"jvp"``;
        metadata).
    """

    prompt_id: np.ndarray
    reward: np.ndarray
    score: np.ndarray
    prompt_weight: np.ndarray | None = None
    sketch_kind: str = "none"
    sketch_seed: int | None = None
    param_dim: int | None = None
    model_name: str = ""
    sketch_blocks: int | None = None
    sketch_route: str = ""

    def __post_init__(self):
        prompt_id = np.asarray(self.prompt_id)
        if prompt_id.dtype.kind not in "iuU":
            raise TypeError(f"Rollouts field `prompt_id` must hold integers or strings, got "
                            f"dtype {prompt_id.dtype}")
        if prompt_id.ndim != 1 or prompt_id.size == 0:
            raise ValueError(f"Rollouts field `prompt_id` must be a non-empty 1-D array, got "
                             f"shape {prompt_id.shape}")
        n = prompt_id.size
        reward = _float_array(self.reward, "reward", 1)
        score = _float_array(self.score, "score", 2)
        if reward.shape != (n,):
            raise ValueError(f"Rollouts field `reward` must have shape ({n},) like `prompt_id`, "
                             f"got {reward.shape}")
        if score.shape[0] != n:
            raise ValueError(f"Rollouts field `score` must have {n} rows like `prompt_id`, got "
                             f"shape {score.shape}")
        if score.shape[1] == 0:
            raise ValueError("Rollouts field `score` must have k >= 1 columns, got k = 0")
        weight = None
        if self.prompt_weight is not None:
            weight = _float_array(self.prompt_weight, "prompt_weight", 1)
            if weight.shape != (n,):
                raise ValueError(f"Rollouts field `prompt_weight` must have shape ({n},), got "
                                 f"{weight.shape}")
        _check_meta(self)
        ids = prompt_id.astype(np.int64) if prompt_id.dtype.kind in "iu" else prompt_id
        unique, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        for name, array in (("reward", reward), ("score", score), ("prompt_weight", weight)):
            if array is None:
                continue
            bad = ~np.isfinite(array) if array.ndim == 1 else ~np.all(np.isfinite(array), axis=1)
            if np.any(bad):
                row = int(np.flatnonzero(bad)[0])
                raise ValueError(f"Rollouts field `{name}` must be finite; row {row} (prompt "
                                 f"{unique[inverse[row]].item()!r}) is not")
        small = np.flatnonzero(counts < MIN_GROUP_SIZE)
        if small.size:
            a = int(small[0])
            raise ValueError(f"Rollouts field `prompt_id`: prompt {unique[a].item()!r} has {counts[a]} "
                             f"samples; every prompt needs >= {MIN_GROUP_SIZE} (order-3 kernels)")
        if weight is not None:
            _check_weights(weight, inverse, unique)
        for name, array in (("prompt_id", ids), ("reward", reward), ("score", score),
                            ("prompt_weight", weight)):
            if array is not None:
                array = array.copy() if array is getattr(self, name) else array
                array.setflags(write=False)
            object.__setattr__(self, name, array)

    # ------------------------------------------------------------------ shape
    @property
    def n_samples(self) -> int:
        """``n``, the number of rows."""
        return int(self.reward.size)

    @property
    def sketch_dim(self) -> int:
        """``k``, the number of score columns (``d`` for full scores)."""
        return int(self.score.shape[1])

    @property
    def is_sketched(self) -> bool:
        """Whether ``score`` is a random projection (``sketch_kind != "none"``)."""
        return self.sketch_kind != "none"

    def column_groups(self) -> np.ndarray:
        """The independent block of each score column ``(k,)``: ``0..m-1`` in contiguous runs of
        ``k/m`` for ``sketch_blocks = m``, else ``0..k-1`` (each column its own)."""
        k = self.sketch_dim
        if self.sketch_blocks is None:
            return np.arange(k)
        return np.arange(k) // (k // self.sketch_blocks)

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, index)``: the sorted distinct prompt ids ``(P,)`` and each row's group ``(n,)``."""
        ids, index = np.unique(self.prompt_id, return_inverse=True)
        return ids, index.reshape(-1)

    @property
    def n_prompts(self) -> int:
        """``P``, the number of groups."""
        return int(np.unique(self.prompt_id).size)

    def group_weights(self) -> np.ndarray | None:
        """``f(x)`` per group ``(P,)``, normalised to sum to one, or ``None`` (i.i.d. prompts)."""
        if self.prompt_weight is None:
            return None
        _, index = self.groups()
        first = np.zeros(self.n_prompts)
        first[index] = self.prompt_weight
        return first / first.sum()

    # ------------------------------------------------------------------ I/O
    def save(self, path) -> Path:
        """Write to ``path`` (``.npz`` or ``.parquet``) atomically: a temporary file, then rename.

        Returns the path written. Parquet needs the optional ``pyarrow`` (``pip install
        ustat-rl[parquet]``).
        """
        path = check_rollouts_path(path, "path")
        if path.suffix == ".parquet":
            _require_pyarrow()
        writer = _write_npz if path.suffix == ".npz" else _write_parquet
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                writer(self, handle)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    @classmethod
    def load(cls, path) -> "Rollouts":
        """Read a file written by :meth:`save` (or any file with the same fields)."""
        return load_rollouts(path)


def _float_array(value, name: str, ndim: int) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"Rollouts field `{name}` must be real numbers: {exc}") from None
    if array.ndim != ndim:
        raise ValueError(f"Rollouts field `{name}` must be {ndim}-D, got shape {array.shape}")
    return array


def _check_meta(r: Rollouts) -> None:
    if r.sketch_kind not in SKETCH_KINDS:
        raise ValueError(f"Rollouts field `sketch_kind` must be one of {SKETCH_KINDS}, got "
                         f"{r.sketch_kind!r}")
    for name in ("sketch_seed", "param_dim", "sketch_blocks"):
        value = getattr(r, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
            raise TypeError(f"Rollouts field `{name}` must be an integer or None, got {value!r}")
        if value is not None:
            object.__setattr__(r, name, int(value))
    if r.param_dim is not None and r.param_dim < 1:
        raise ValueError(f"Rollouts field `param_dim` must be >= 1, got {r.param_dim}")
    k = np.shape(r.score)[1]
    if r.sketch_kind == "none" and r.param_dim is not None and r.param_dim != k:
        raise ValueError(f"Rollouts field `param_dim` must equal the {k} score columns when "
                         f"`sketch_kind` is 'none', got {r.param_dim}")
    if r.sketch_blocks is not None and (r.sketch_kind == "none" or not 1 <= r.sketch_blocks <= k
                                        or k % r.sketch_blocks):
        raise ValueError(f"Rollouts field `sketch_blocks` must divide the {k} score columns of a "
                         f"sketch, got {r.sketch_blocks} (sketch_kind {r.sketch_kind!r})")
    if not isinstance(r.sketch_route, str):
        raise TypeError(f"Rollouts field `sketch_route` must be a string, got {r.sketch_route!r}")
    if not isinstance(r.model_name, str):
        raise TypeError(f"Rollouts field `model_name` must be a string, got {r.model_name!r}")


def _check_weights(weight: np.ndarray, inverse: np.ndarray, unique: np.ndarray) -> None:
    if np.any(weight <= 0):
        row = int(np.flatnonzero(weight <= 0)[0])
        raise ValueError(f"Rollouts field `prompt_weight` must be > 0; prompt "
                         f"{unique[inverse[row]].item()!r} has {weight[row]!r}")
    first = np.zeros(unique.size)
    first[inverse] = weight
    bad = np.flatnonzero(weight != first[inverse])
    if bad.size:
        a = unique[inverse[int(bad[0])]].item()
        raise ValueError(f"Rollouts field `prompt_weight` must be constant within a prompt; "
                         f"prompt {a!r} has several values")


# ---------------------------------------------------------------------- files
def check_rollouts_path(path, name: str = "path", must_exist: bool = False) -> Path:
    """Validate a rollouts file path before any work: suffix, and parent folder or file existing."""
    path = Path(path)
    if path.suffix not in ROLLOUT_SUFFIXES:
        raise ValueError(f"`{name}` must end in one of {ROLLOUT_SUFFIXES}, got {str(path)!r}")
    if must_exist and not path.is_file():
        raise FileNotFoundError(f"`{name}` {str(path)!r} does not exist")
    if not must_exist and not path.parent.is_dir():
        raise FileNotFoundError(f"`{name}`: folder {str(path.parent)!r} does not exist")
    return path


def _meta_dict(r: Rollouts) -> dict:
    return {name: getattr(r, name) for name in _META_FIELDS}


def _write_npz(r: Rollouts, handle) -> None:
    arrays = {"prompt_id": r.prompt_id, "reward": r.reward, "score": r.score,
              "metadata": np.array(json.dumps(_meta_dict(r)))}
    if r.prompt_weight is not None:
        arrays["prompt_weight"] = r.prompt_weight
    np.savez(handle, **arrays)


def _require_pyarrow():
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError("Parquet rollouts need pyarrow: pip install 'ustat-rl[parquet]'") from None


def _write_parquet(r: Rollouts, handle) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    k = r.sketch_dim
    columns = {
        "prompt_id": pa.array(r.prompt_id),
        "reward": pa.array(r.reward),
        "score": pa.FixedSizeListArray.from_arrays(pa.array(r.score.ravel()), k),
    }
    if r.prompt_weight is not None:
        columns["prompt_weight"] = pa.array(r.prompt_weight)
    table = pa.table(columns).replace_schema_metadata(
        {"ustat_rl.metadata": json.dumps(_meta_dict(r))})
    pq.write_table(table, handle)


def read_npz(path, name: str = "path") -> dict:
    """The arrays of the ``.npz`` archive ``path``, by name, never unpickled.

    One-line ``ValueError`` naming ``name`` for a file that is empty, not a zip archive of
    arrays (a text file, a pickle: numpy would fall back to unpickling it, which is refused, and
    numpy's advice to allow it is not passed on), or an archive holding an object array.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):  # a single .npy array under an .npz name
                raise ValueError("a single .npy array, not an archive of named arrays")
            return {key: data[key] for key in data.files}
    except (EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
        if path.stat().st_size == 0:
            why = "empty"
        elif "pickle" in str(exc):  # numpy's words would suggest allow_pickle=True
            why = ("not a .npz archive of arrays (it holds pickled Python objects, or is not a "
                   "numpy file at all; pickled data are never loaded)")
        else:
            why = f"not a readable .npz archive ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        raise ValueError(f"`{name}` {str(path)!r} is {why}") from None


def load_rollouts(path, name: str = "path") -> Rollouts:
    """Read :class:`Rollouts` from ``.npz`` or ``.parquet`` (validated like any construction).

    ``name`` is the parameter named in errors (the CLI passes ``ROLLOUTS``); an empty, truncated
    or otherwise unreadable ``.npz`` is a ``ValueError`` naming it.
    """
    path = check_rollouts_path(path, name, must_exist=True)
    if path.suffix == ".npz":
        arrays = read_npz(path, name)
        meta = json.loads(str(arrays.pop("metadata"))) if "metadata" in arrays else {}
    else:
        _require_pyarrow()
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(b"ustat_rl.metadata", b"{}")
        meta = json.loads(raw.decode())
        arrays = {}
        for name in table.column_names:
            column = table.column(name).combine_chunks()
            if name == "score":
                k = column.type.list_size if hasattr(column.type, "list_size") else None
                if k is None:
                    raise ValueError("Rollouts field `score` in a Parquet file must be a "
                                     "fixed-size list column")
                arrays[name] = column.flatten().to_numpy(zero_copy_only=False).reshape(-1, k)
            else:
                arrays[name] = column.to_numpy(zero_copy_only=False)
        if "prompt_id" in arrays and arrays["prompt_id"].dtype == object:
            arrays["prompt_id"] = arrays["prompt_id"].astype(str)
    known = {f.name for f in fields(Rollouts)}
    unknown = sorted((set(arrays) | set(meta)) - known)
    if unknown:
        raise ValueError(f"Rollouts file {str(path)!r} has unknown field `{unknown[0]}`")
    missing = [name for name in ("prompt_id", "reward", "score") if name not in arrays]
    if missing:
        raise ValueError(f"Rollouts field `{missing[0]}` is missing from {str(path)!r}")
    return Rollouts(**arrays, **meta)
