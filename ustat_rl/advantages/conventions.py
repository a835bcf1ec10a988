"""Named advantage conventions: the group-relative advantages that RL frameworks actually compute.

The paper analyses the leave-one-out baseline (Algorithm 1) and a std-normalised variant
(Algorithm 2); the frameworks people run differ from both in small ways that matter: a full
group mean instead of leave-one-out, a Bessel-corrected standard deviation with an epsilon
*added to it*, batch instead of group statistics, and rules for all-equal and one-sample groups.
Each convention is ``advantages(rewards (n,), group_ids (n,)) -> (n,)``, computed from the fields
of its :class:`ConventionSpec` (baseline, scale, epsilon and its placement, the singleton and
zero-std rules) by one evaluator, so the rule's data is all there is to it. The table in
``docs/conventions.md`` maps each (framework, option, commit) to its name here; the exact
finite-G moments of the group conventions, for binary rewards, are in
:mod:`ustat_rl.theory.advantage` (docs/theory.md section 7).

Notation: ``z`` is a reward, ``m_g`` the mean of its group, ``s_g`` the Bessel-corrected standard
deviation of its group (``sqrt(sum (z - m_g)^2 / (n_g - 1))``), ``s_B`` the same over the whole
batch, and ``n_g`` the size of the group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ConventionSpec", "CONVENTIONS", "CONVENTION_NAMES", "VERL_SINGLETON_DIVISOR", "advantages",
           "get_convention"]


@dataclass(frozen=True)
class ConventionSpec:
    """What one framework option computes, stated as data the reference and the kit both read.

    Attributes
    ----------
    name, framework, option : str
        The name here (a key of :data:`CONVENTIONS`), the framework, and the option (flag or
        config key as of ``commit``) that selects the advantage.
    repository, path, commit, commit_date : str
        Where the rule was read: ``owner/name`` on GitHub, the file(s), a commit that exists there
        and its date (docs/conventions.md gives the date it was read).
    formula : str
        The advantage, in the notation of the module docstring.
    baseline : {"mean", "leave_one_out"}
        Numerator ``z - m_g``, or ``z - (sum_g z - z)/(n_g - 1) = n_g (z - m_g)/(n_g - 1)``.
    scale : {"none", "group", "leave_one_out", "batch", "whiten"}
        What divides it: nothing; the std of the group's rewards; the std of the *other* rewards
        of the group; the std of the batch's rewards; or the numerator is whitened over the batch,
        ``(c - mean_B c)/d(var_B c)``.
    epsilon, epsilon_placement : float, {"none", "added to std", "inside sqrt", "variance floor"}
        ``d = s + epsilon``, ``sqrt(s^2 + epsilon)`` or ``sqrt(max(s^2, epsilon))``.
    bessel, zero_std : bool or None, {"divide", "keep numerator", "zero"}
        Whether stds divide by ``n - 1`` (``None``: none is taken); where the std is exactly 0,
        divide anyway, keep the numerator undivided, or give 0.
    singleton_numerator, singleton_divisor : {"0", "z"}, float
        A one-sample group's numerator (its own mean removed, or a mean of 0 substituted) and,
        under ``scale="group"``, what divides it.
    count_epsilon : float
        Added to the sample count of the whitening mean and variance (verl's ``masked_mean``).
    working_precision : str
        What the framework computes in (the kit's tolerance covers float32 or finer).
    zero_variance, singleton, project_name : str
        What an all-equal group and a one-sample group get, in words; the estimator of
        docs/theory.md section 2 the convention equals, when it equals one.
    min_group_size, min_batch_size, equal_group_sizes : int, int, bool
        The smallest group and batch the framework defines (smaller: ``ValueError`` here);
        whether it reshapes rewards into ``(-1, G)`` and so needs equal groups.

    ``statistics`` is ``"group"`` when each advantage depends only on its own group's rewards
    (the exact theory of :mod:`ustat_rl.theory.advantage` applies) and ``"batch"`` otherwise.
    """

    name: str
    framework: str
    option: str
    repository: str
    path: str
    commit: str
    commit_date: str
    formula: str
    baseline: str = "mean"
    scale: str = "none"
    epsilon: float = 0.0
    epsilon_placement: str = "none"
    bessel: bool | None = None
    zero_std: str = "divide"
    singleton_numerator: str = "0"
    singleton_divisor: float = 1.0
    count_epsilon: float = 0.0
    working_precision: str = "the rewards' dtype"
    zero_variance: str = "0 (the centred rewards vanish)"
    singleton: str = "0"
    min_group_size: int = 1
    min_batch_size: int = 1
    equal_group_sizes: bool = False
    project_name: str = ""

    @property
    def statistics(self) -> str:
        return "batch" if self.scale in ("batch", "whiten") else "group"


@dataclass(frozen=True)
class _Parts:
    """One evaluation, each (n,): ``advantage = numerator / denominator`` where divided, the std
    inside the denominator (0 where none is taken), and which samples are one-sample groups."""

    advantage: np.ndarray
    numerator: np.ndarray
    denominator: np.ndarray
    std: np.ndarray
    single: np.ndarray


# --------------------------------------------------------------------------- private core
# Every statistic is computed around a shift (the first reward of the group, or of the batch):
# then an all-equal group has deviations exactly 0 whatever its offset, and large offsets lose
# no precision in the mean; root sums of squares are scaled by the largest deviation, so they
# are 0 exactly for ties and never underflow to 0 otherwise.
def _first_index(inverse: np.ndarray, n_groups: int) -> np.ndarray:
    first = np.full(n_groups, inverse.size, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(inverse.size))
    return first


def _root_ss(dev, inverse, k):
    """``sqrt(sum dev^2)`` per group, shape (k,)."""
    top = np.zeros(k)
    np.maximum.at(top, inverse, np.abs(dev))
    safe = np.where(top > 0, top, 1.0)
    return top * np.sqrt(np.bincount(inverse, (dev / safe[inverse]) ** 2, minlength=k))


def _deviations(z, inverse, counts):
    """``z - m_g`` and the groups' root sums of squared deviations, shape (n,) and (k,)."""
    shift = z[_first_index(inverse, counts.size)]  # (k,)
    mean = shift + np.bincount(inverse, z - shift[inverse], minlength=counts.size) / counts
    dev = z - mean[inverse]
    return dev, _root_ss(dev, inverse, counts.size)


def _batch_moments(x, count_epsilon=0.0):
    """Shifted batch mean (sum / (N + eps)) removed, and the root sum of squares left."""
    shift = x[0]
    centred = x - (shift + np.mean(x - shift)) * (x.size / (x.size + count_epsilon))
    return centred, float(_root_ss(centred, np.zeros(x.size, dtype=np.int64), 1)[0])


def _others_std(z, inverse, counts):
    """Bessel std of the other ``n - 1`` rewards of each sample's group (0 for n < 3)."""
    out = np.zeros(z.size)
    order = np.argsort(inverse, kind="stable")
    for n in np.unique(counts):
        if n < 3:
            continue
        members = order[np.isin(inverse[order], np.flatnonzero(counts == n))].reshape(-1, n)
        others = z[members][:, None, :].repeat(n, axis=1)[:, ~np.eye(n, dtype=bool)]
        others = others.reshape(-1, n, n - 1)  # (k, n, n - 1): row i leaves sample i out
        dev = others - others[..., :1]  # exact zeros for ties
        dev = dev - dev.mean(axis=-1, keepdims=True)
        top = np.abs(dev).max(axis=-1, keepdims=True)
        rms = np.sqrt(np.sum((dev / np.where(top > 0, top, 1.0)) ** 2, axis=-1) / (n - 2))
        out[members] = top[..., 0] * rms
    return out


def _combine(spec: ConventionSpec, s):
    placement, eps = spec.epsilon_placement, spec.epsilon
    if placement in ("inside sqrt", "variance floor"):
        return np.sqrt(s * s + eps if placement == "inside sqrt" else np.maximum(s * s, eps))
    return s + eps if placement == "added to std" else s


def _evaluate(spec: ConventionSpec, z, inverse, counts) -> _Parts:
    """The convention's advantages, read off the fields of ``spec`` (no name is special)."""
    n = counts[inverse].astype(np.float64)  # (n,)
    single = n == 1
    dev, root = _deviations(z, inverse, counts)
    num = dev * n / np.maximum(n - 1, 1) if spec.baseline == "leave_one_out" else dev
    num = np.where(single, z if spec.singleton_numerator == "z" else 0.0, num)  # (n,)
    if spec.scale == "none":
        return _Parts(num, num, np.ones(z.size), np.zeros(z.size), single)
    if spec.scale == "group":
        dof = np.maximum(counts - 1 if spec.bessel else counts, 1)
        s = np.where(single, 0.0, (root / np.sqrt(dof))[inverse])
    elif spec.scale == "leave_one_out":
        s = _others_std(z, inverse, counts)
    elif spec.scale == "batch":
        root_b = _batch_moments(z)[1]
        s = np.full(z.size, root_b / np.sqrt(z.size - 1) if z.size > 1 else 0.0)
    else:  # "whiten": the numerator's batch mean removed, divided by its batch std
        num, root_b = _batch_moments(num, spec.count_epsilon)
        var_n = (z.size + spec.count_epsilon) * ((z.size - 1) / z.size if spec.bessel else 1)
        s = np.full(z.size, root_b / np.sqrt(var_n))
    d = _combine(spec, s)
    d = np.where(single, spec.singleton_divisor, d) if spec.scale == "group" else d
    if spec.zero_std != "divide":  # where s = 0 exactly, the numerator (or 0) is kept
        d = np.where(s > 0, d, 1.0)
        num = num if spec.zero_std == "keep numerator" else np.where(s > 0, num, 0.0)
    return _Parts(num / np.where(d != 0, d, 1.0), num, d, s, single)


#: verl substitutes ``torch.tensor(1.0)`` (float32) for a one-sample group's std, so ``std + 1e-6``
#: is rounded to float32 whatever the rewards' dtype: 1.0000009536743164, not 1.000001.
VERL_SINGLETON_DIVISOR = float(np.float32(1.0) + np.float32(1e-6))

def _at(pin, path):
    return (pin[0], path, *pin[1:])


_TRL = ("huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8", "2026-07-24")
_VERL = ("verl-project/verl", "1dda039b9c6311889a9c9a26040677e1254814f9", "2026-08-22")
_ORLHF = ("OpenRLHF/OpenRLHF", "3c3be6234e0cb353e76bb8019947db9dfe99fca7", "2026-08-13")
_NEMO = ("NVIDIA-NeMo/RL", "7ea279abfbeb698b092856d0dab61e7cf39bc909", "2026-08-22")
_TRL_G, _TRL_R = _at(_TRL, "trl/trainer/grpo_trainer.py"), _at(_TRL, "trl/trainer/rloo_trainer.py")
_VERL_C = _at(_VERL, "verl/trainer/ppo/core_algos.py")
_VERL_V, _VERL_W = (_at(_VERL, f"verl/trainer/ppo/core_algos.py, verl/utils/{f}.py")
                    for f in ("groupwise", "torch_functional"))
_ORL = _at(_ORLHF, "openrlhf/trainer/ppo_utils/experience_maker.py")
_NEMO_A = _at(_NEMO, "nemo_rl/algorithms/advantage_estimator.py, nemo_rl/algorithms/utils.py")
_HERE = ("", "ustat_rl/estimators.py; docs/theory.md section 2", "", "")
_LOO, _F32 = "z - (sum_g z - z)/(n_g - 1)", "float32"
_STD = dict(scale="group", epsilon_placement="added to std", bessel=True)
_STD_MEAN, _WHITENED = "std-normalised, full-mean numerator", "full mean, then batch-whitened"
_ZV_WHITEN = "0 before whitening; then shifted by the batch mean"


def _spec(name, framework, option, where, formula, **fields):
    return ConventionSpec(name, framework, option, *where, formula, **fields)


_SPECS = (
    _spec("trl_group", "TRL", 'GRPOTrainer, scale_rewards="group" (default)', _TRL_G,
          "(z - m_g) / (s_g + 1e-4)", **_STD, epsilon=1e-4, singleton_divisor=1e-4,
          singleton="0 (std set to 0, numerator 0)", equal_group_sizes=True,
          working_precision=_F32, project_name=_STD_MEAN),
    _spec("trl_batch", "TRL", 'GRPOTrainer, scale_rewards="batch"', _TRL_G,
          "(z - m_g) / (s_B + 1e-4)", scale="batch", epsilon=1e-4, bessel=True,
          epsilon_placement="added to std", equal_group_sizes=True, working_precision=_F32,
          project_name="full mean divided by the batch std"),
    _spec("trl_none", "TRL", 'GRPOTrainer, scale_rewards="none"', _TRL_G, "z - m_g",
          equal_group_sizes=True, working_precision=_F32, project_name="fullmean"),
    _spec("verl_grpo", "verl", "algorithm.adv_estimator=grpo, norm_adv_by_std_in_grpo=True "
          "(default)", _VERL_C, "(z - m_g) / (s_g + 1e-6)", **_STD, epsilon=1e-6,
          singleton_numerator="z", singleton_divisor=VERL_SINGLETON_DIVISOR,
          singleton="z / 1.0000009537 (mean 0 and a float32 std 1 are substituted; 1 + 1e-6 "
                    "rounds in float32)", project_name=_STD_MEAN),
    _spec("verl_grpo_vectorized", "verl", "algorithm.adv_estimator=grpo_vectorized", _VERL_V,
          "(z - m_g) / (s_g + 1e-6), m_g and s_g computed in float32", **_STD, epsilon=1e-6,
          singleton_numerator="z", singleton_divisor=VERL_SINGLETON_DIVISOR,
          working_precision="float32 statistics whatever the rewards' dtype",
          singleton="z / 1.0000009537 (as verl_grpo)", project_name=_STD_MEAN),
    _spec("verl_grpo_nostd", "verl", "algorithm.adv_estimator=grpo, norm_adv_by_std_in_grpo=False",
          _VERL_C, "z - m_g", singleton_numerator="z", singleton="z (mean 0 is substituted)",
          project_name="fullmean"),
    _spec("verl_rloo", "verl", "algorithm.adv_estimator=rloo", _VERL_C,
          "z - (sum_g z - z)/(n_g - 1) = n_g (z - m_g)/(n_g - 1)", baseline="leave_one_out",
          singleton_numerator="z", singleton="z (left unchanged)", project_name="grpo"),
    _spec("verl_rloo_vectorized", "verl", "algorithm.adv_estimator=rloo_vectorized", _VERL_C,
          "(n_g z - sum_g z)/(n_g - 1), 0 for a singleton", baseline="leave_one_out",
          singleton="0 (multiplied by n_g > 1)", project_name="grpo"),
    _spec("verl_reinforce_pp_baseline", "verl",
          "algorithm.adv_estimator=reinforce_plus_plus_baseline", _VERL_W,
          "c = z - m_g; (c - mean_B c) / sqrt(var_B c + 1e-8), mean_B and var_B dividing by "
          "N + 1e-8 (masked_mean), one token per response", scale="whiten", epsilon=1e-8,
          epsilon_placement="inside sqrt", bessel=True, count_epsilon=1e-8,
          singleton_numerator="z", zero_variance=_ZV_WHITEN,
          singleton="c = z (mean 0 is substituted)", min_batch_size=2, project_name=_WHITENED),
    _spec("openrlhf_group_norm", "OpenRLHF", "--algo.advantage.estimator group_norm", _ORL,
          "(z - m_g) / (s_g + 1e-9)", **_STD, epsilon=1e-9, singleton_divisor=np.nan,
          singleton="NaN (Bessel std of one sample)", min_group_size=2, equal_group_sizes=True,
          project_name=_STD_MEAN),
    _spec("openrlhf_dr_grpo", "OpenRLHF", "--algo.advantage.estimator dr_grpo", _ORL, "z - m_g",
          equal_group_sizes=True, project_name="fullmean"),
    _spec("openrlhf_reinforce_baseline", "OpenRLHF",
          "--algo.advantage.estimator reinforce_baseline", _ORL,
          "c = z - m_g; (c - mean_B c) / sqrt(max(var_B c, 1e-8)), population variance, one "
          "token per response", scale="whiten", epsilon=1e-8, epsilon_placement="variance floor",
          bessel=False, working_precision="float32 (whitened after .float())",
          zero_variance=_ZV_WHITEN, equal_group_sizes=True, project_name=_WHITENED),
    _spec("openrlhf_rloo", "OpenRLHF", "--algo.advantage.estimator rloo", _ORL, _LOO,
          baseline="leave_one_out", singleton="division by zero (n_samples_per_prompt - 1 = 0)",
          min_group_size=2, equal_group_sizes=True, project_name="grpo"),
    _spec("trl_rloo", "TRL", "RLOOTrainer, normalize_advantages=False (default)", _TRL_R, _LOO,
          baseline="leave_one_out", working_precision=_F32, equal_group_sizes=True,
          project_name="grpo"),
    _spec("trl_rloo_normalized", "TRL", "RLOOTrainer, normalize_advantages=True", _TRL_R,
          "a = leave-one-out; (a - mean_B a) / (s_B(a) + 1e-4)", baseline="leave_one_out",
          scale="whiten", epsilon=1e-4, epsilon_placement="added to std", bessel=True,
          working_precision=_F32, zero_variance="0 before the batch normalisation",
          singleton="0 before normalisation", min_batch_size=2, equal_group_sizes=True,
          project_name="grpo, whitened over the batch"),
    _spec("nemo_rl_grpo", "NeMo-RL", "grpo.use_leave_one_out_baseline=true, "
          "grpo.normalize_rewards=true (the defaults)", _NEMO_A,
          f"({_LOO}) / (s_-i + 1e-6), s_-i the Bessel std of the other n_g - 1 rewards; "
          "undivided where s_-i = 0", baseline="leave_one_out", scale="leave_one_out",
          epsilon=1e-6, epsilon_placement="added to std", bessel=True, zero_std="keep numerator",
          zero_variance="0; a sample whose n_g - 1 others are equal keeps its undivided numerator",
          singleton="0 (baseline set to the reward)", min_group_size=3,
          project_name="leave-one-out, divided by the others' std"),
    _spec("grpo", "ustat-rl", "grpo_gradient (Algorithm 1)", _HERE, _LOO,
          baseline="leave_one_out", singleton="undefined", min_group_size=2, project_name="grpo"),
    _spec("fullmean", "ustat-rl", "fullmean_gradient", _HERE, "z - m_g", singleton="undefined",
          min_group_size=2, project_name="fullmean"),
    _spec("paper_algorithm2", "ustat-rl", "Algorithm 2 of the paper, all-equal groups zeroed",
          ("", "docs/theory.md section 2", "", ""), f"({_LOO}) / s_g, 0 when s_g = 0",
          baseline="leave_one_out", scale="group", bessel=True, zero_std="zero",
          zero_variance="0 (the rule chosen here)", singleton="undefined", min_group_size=2,
          project_name="std-normalised, leave-one-out numerator"),
)

#: Every named convention, by name.
CONVENTIONS: dict[str, ConventionSpec] = {s.name: s for s in _SPECS}

#: The names, in the order of docs/conventions.md.
CONVENTION_NAMES: tuple[str, ...] = tuple(CONVENTIONS)


def get_convention(name) -> ConventionSpec:
    """The :class:`ConventionSpec` called ``name``; ``ValueError`` listing the names otherwise."""
    if isinstance(name, ConventionSpec):
        return name
    if name not in CONVENTIONS:
        raise ValueError(f"`convention` must be one of {CONVENTION_NAMES}, got {name!r}")
    return CONVENTIONS[name]


def _check_inputs(spec: ConventionSpec, rewards, group_ids):
    z = np.asarray(rewards)
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"`rewards` must be a non-empty 1-D array, got shape {z.shape}")
    if not np.issubdtype(z.dtype, np.number) or np.iscomplexobj(z):
        raise TypeError(f"`rewards` must hold real numbers, got dtype {z.dtype}")
    z = z.astype(np.float64)
    if not np.all(np.isfinite(z)):
        raise ValueError("`rewards` must be finite (no NaN or inf)")
    ids = np.asarray(group_ids)
    if ids.shape != z.shape:
        raise ValueError(f"`group_ids` must have the shape of `rewards` {z.shape}, got {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"`group_ids` must be integers, got dtype {ids.dtype}")
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    if counts.min() < spec.min_group_size:
        raise ValueError(f"convention {spec.name!r} needs groups of at least "
                         f"{spec.min_group_size} samples (singletons: {spec.singleton}), got a "
                         f"group of {counts.min()}")
    if z.size < spec.min_batch_size:
        raise ValueError(f"convention {spec.name!r} needs a batch of at least "
                         f"{spec.min_batch_size} samples, got {z.size}")
    if spec.equal_group_sizes and counts.min() != counts.max():
        raise ValueError(f"convention {spec.name!r} reshapes rewards into (-1, G), so every group "
                         f"must have the same size; got sizes {counts.min()} to {counts.max()}")
    return z, inverse.reshape(-1), counts


def advantages(convention, rewards, group_ids) -> np.ndarray:
    """The advantages a named framework option computes (docs/theory.md section 2).

    Parameters
    ----------
    convention : str or ConventionSpec
        One of :data:`CONVENTION_NAMES`.
    rewards : array_like, shape (n,)
        One scalar reward per response (float32 inputs are computed in float64).
    group_ids : array_like of int, shape (n,)
        The prompt (group) of each response, in any order; groups may be ragged unless the
        convention reshapes into equal groups.

    Returns
    -------
    ndarray, shape (n,)
        float64 advantages.

    Notes
    -----
    Each convention's formula, epsilon and rules are in its :class:`ConventionSpec` and in
    docs/conventions.md. The frameworks that subtract the full group mean compute
    ``z - m_g = ((n_g - 1)/n_g) (z - leave-one-out mean)``, so without the std division they are
    ``(G - 1)/G`` times the unbiased leave-one-out estimator (docs/theory.md C2); with it, they
    are ``(G - 1)/G`` times Algorithm 2's advantage, up to the epsilon and the all-equal rule.

    Examples
    --------
    >>> r = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    >>> ids = [0, 0, 0, 1, 1, 1]
    >>> [round(float(a), 4) for a in advantages("trl_group", r, ids)]
    [1.1545, -0.5773, -0.5773, 0.0, 0.0, 0.0]
    >>> [round(float(a), 4) for a in advantages("grpo", r, ids)]
    [1.0, -0.5, -0.5, 0.0, 0.0, 0.0]
    """
    spec = get_convention(convention)
    z, inverse, counts = _check_inputs(spec, rewards, group_ids)
    return _evaluate(spec, z, inverse, counts).advantage


def _grouped(spec: ConventionSpec, rewards: np.ndarray) -> np.ndarray:
    """Advantages of many equal groups at once: ``rewards (M, G) -> (M, G)``, no validation."""
    M, G = rewards.shape
    z = rewards.reshape(-1).astype(np.float64)
    return _evaluate(spec, z, np.repeat(np.arange(M), G), np.full(M, G)).advantage.reshape(M, G)
