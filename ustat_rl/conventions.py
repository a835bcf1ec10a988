"""Named advantage conventions: the group-relative advantages that RL frameworks actually compute.

The paper analyses the leave-one-out baseline (Algorithm 1) and a std-normalised variant
(Algorithm 2); the frameworks people run differ from both in small ways that matter: a full
group mean instead of leave-one-out, a Bessel-corrected standard deviation with an epsilon
*added to it*, batch instead of group statistics, and a rule for groups whose rewards are all
equal. Each convention here is one documented function of the rewards and the group ids,

    advantages(rewards (n,), group_ids (n,)) -> (n,),

with a :class:`ConventionSpec` that states its formula, epsilon, Bessel choice, where its
statistics come from, and what it does with all-equal and one-sample groups. The table in
``docs/conventions.md`` maps each (framework, option, version) to its name here; the exact
finite-G moments of the group conventions, for binary rewards, are in
:mod:`ustat_rl.theory.advantage` (docs/theory.md section 7).

Notation: ``z`` is a reward, ``m_g`` the mean of its group, ``s_g`` the Bessel-corrected standard
deviation of its group (``sqrt(sum (z - m_g)^2 / (n_g - 1))``), ``s_B`` the same over the whole
batch, and ``n_g`` the size of the group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["ConventionSpec", "CONVENTIONS", "CONVENTION_NAMES", "VERL_SINGLETON_DIVISOR", "advantages",
           "get_convention"]


@dataclass(frozen=True)
class ConventionSpec:
    """What one framework option computes, stated so that it can be checked.

    Attributes
    ----------
    name : str
        The convention's name in this project (a key of :data:`CONVENTIONS`).
    framework, option, source : str
        The framework, the option that selects this advantage, and the source file and commit it
        was read from (docs/conventions.md).
    formula : str
        The advantage in the notation of the module docstring.
    epsilon : float
        The constant that keeps the denominator away from zero (0 when there is none).
    epsilon_placement : {"none", "added to std", "inside sqrt"}
    bessel : bool or None
        Whether standard deviations divide by ``n - 1`` (``None`` when none is taken).
    statistics : {"group", "batch"}
        ``"group"`` when each advantage depends only on its own group's rewards (the exact
        theory of :mod:`ustat_rl.theory.advantage` applies), ``"batch"`` when a statistic of the
        whole batch enters.
    zero_variance : str
        What an all-equal group gets.
    singleton : str
        What a group of one sample gets.
    min_group_size, min_batch_size : int
        The smallest group and batch for which the framework's output is defined (smaller ones
        give NaN or a division by zero there, and a ``ValueError`` here).
    equal_group_sizes : bool
        Whether the framework reshapes rewards into ``(-1, G)`` and so needs every group to have
        the same size.
    project_name : str
        The estimator of docs/theory.md section 2 this convention equals, when it equals one.
    """

    name: str
    framework: str
    option: str
    source: str
    formula: str
    epsilon: float
    epsilon_placement: str
    bessel: bool | None
    statistics: str
    zero_variance: str
    singleton: str
    min_group_size: int
    min_batch_size: int
    equal_group_sizes: bool
    project_name: str
    function: Callable = None  # (z (n,), inverse (n,), counts (k,)) -> (n,), set below


# --------------------------------------------------------------------------- private core
# Every statistic is computed around a shift (the first reward of the group, or of the batch):
# then an all-equal group has deviations exactly 0 whatever its offset, and large offsets lose
# no precision in the mean.
def _first_index(inverse: np.ndarray, n_groups: int) -> np.ndarray:
    first = np.full(n_groups, inverse.size, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(inverse.size))
    return first


def _group_mean(z, inverse, counts):
    shift = z[_first_index(inverse, counts.size)]  # (k,)
    return shift + np.bincount(inverse, z - shift[inverse], minlength=counts.size) / counts


def _group_std(z, inverse, counts, mean, singleton_value):
    dev = z - mean[inverse]
    ss = np.bincount(inverse, dev * dev, minlength=counts.size)
    safe = np.maximum(counts - 1, 1)
    return np.where(counts > 1, np.sqrt(ss / safe), singleton_value)


def _batch_mean_std(x):
    shift = x[0]
    mean = shift + np.mean(x - shift)
    if x.size < 2:
        return mean, 0.0
    return mean, float(np.sqrt(np.sum((x - mean) ** 2) / (x.size - 1)))


def _centred(z, inverse, counts, singleton_mean_zero=False):
    mean = _group_mean(z, inverse, counts)
    if singleton_mean_zero:
        mean = np.where(counts > 1, mean, 0.0)
    return z - mean[inverse], mean


def _leave_one_out(z, inverse, counts, singleton):
    # z - (S - z)/(n - 1) = n (z - m)/(n - 1): exact zero for all-equal groups
    dev, _ = _centred(z, inverse, counts)
    n = counts[inverse].astype(np.float64)
    loo = dev * n / np.maximum(n - 1.0, 1.0)
    if singleton == "zero":
        return np.where(n > 1, loo, 0.0)
    return np.where(n > 1, loo, z)  # "reward": the raw reward is kept


def _trl_group(z, inverse, counts):
    dev, mean = _centred(z, inverse, counts)
    std = _group_std(z, inverse, counts, mean, 0.0)
    return dev / (std[inverse] + 1e-4)


def _trl_batch(z, inverse, counts):
    dev, _ = _centred(z, inverse, counts)
    return dev / (_batch_mean_std(z)[1] + 1e-4)


def _mean_only(z, inverse, counts):
    return _centred(z, inverse, counts)[0]


#: verl substitutes ``torch.tensor(1.0)`` (float32) for a one-sample group's std, so ``std + 1e-6``
#: is rounded to float32 whatever the rewards' dtype: 1.0000009536743164, not 1.000001.
VERL_SINGLETON_DIVISOR = float(np.float32(1.0) + np.float32(1e-6))


def _verl_grpo(z, inverse, counts):
    dev, mean = _centred(z, inverse, counts, singleton_mean_zero=True)
    std = _group_std(z, inverse, counts, mean, 1.0)
    return dev / np.where(counts > 1, std + 1e-6, VERL_SINGLETON_DIVISOR)[inverse]


def _verl_grpo_nostd(z, inverse, counts):
    return _centred(z, inverse, counts, singleton_mean_zero=True)[0]


def _openrlhf_group_norm(z, inverse, counts):
    dev, mean = _centred(z, inverse, counts)
    std = _group_std(z, inverse, counts, mean, np.nan)
    return dev / (std[inverse] + 1e-9)


def _trl_rloo_normalized(z, inverse, counts):
    loo = _leave_one_out(z, inverse, counts, "zero")
    mean, std = _batch_mean_std(loo)
    return (loo - mean) / (std + 1e-4)


def _verl_rpp_baseline(z, inverse, counts):
    dev = _centred(z, inverse, counts, singleton_mean_zero=True)[0]
    mean, std = _batch_mean_std(dev)
    return (dev - mean) / np.sqrt(std * std + 1e-8)


def _paper_algorithm2(z, inverse, counts):
    loo = _leave_one_out(z, inverse, counts, "zero")
    _, mean = _centred(z, inverse, counts)
    se = _group_std(z, inverse, counts, mean, 0.0)[inverse]
    return np.where(se > 0, loo / np.where(se > 0, se, 1.0), 0.0)


_TRL_GRPO = ("trl/trainer/grpo_trainer.py (huggingface/trl main, scale_rewards as a string; "
             "older releases take a bool: True is 'group', False is 'none')")
_TRL_RLOO = "trl/trainer/rloo_trainer.py (huggingface/trl 00313f21)"
_VERL = "verl/trainer/ppo/core_algos.py (volcengine/verl 012be9d9)"
_ORLHF = ("openrlhf/trainer/ppo_utils/experience_maker.py (OpenRLHF/OpenRLHF main; "
          "dr_grpo in recent versions)")
_HERE = "ustat_rl/estimators.py; docs/theory.md section 2"


def _spec(name, framework, option, source, formula, function, *, epsilon=0.0, placement="none",
          bessel=None, statistics="group", zero_variance="0 (the centred rewards vanish)",
          singleton="0", min_group=1, min_batch=1, equal=False, project=""):
    return ConventionSpec(name, framework, option, source, formula, epsilon, placement, bessel,
                          statistics, zero_variance, singleton, min_group, min_batch, equal,
                          project, function)


_SPECS = (
    _spec("trl_group", "TRL", 'GRPOTrainer, scale_rewards="group" (default)', _TRL_GRPO,
          "(z - m_g) / (s_g + 1e-4)", _trl_group, epsilon=1e-4, placement="added to std",
          bessel=True, singleton="0 (std set to 0, numerator 0)", equal=True,
          project="std-normalised, full-mean numerator"),
    _spec("trl_batch", "TRL", 'GRPOTrainer, scale_rewards="batch"', _TRL_GRPO,
          "(z - m_g) / (s_B + 1e-4)", _trl_batch, epsilon=1e-4, placement="added to std",
          bessel=True, statistics="batch", singleton="0", equal=True,
          project="full mean divided by the batch std"),
    _spec("trl_none", "TRL", 'GRPOTrainer, scale_rewards="none"', _TRL_GRPO, "z - m_g",
          _mean_only, equal=True, project="fullmean"),
    _spec("verl_grpo", "verl", "adv_estimator=grpo, norm_adv_by_std_in_grpo=True (default)",
          _VERL, "(z - m_g) / (s_g + 1e-6)", _verl_grpo, epsilon=1e-6,
          placement="added to std", bessel=True,
          singleton="z / 1.0000009537 (mean 0 and a float32 std 1 are substituted; 1 + 1e-6 "
                    "rounds in float32)",
          project="std-normalised, full-mean numerator"),
    _spec("verl_grpo_nostd", "verl", "adv_estimator=grpo, norm_adv_by_std_in_grpo=False", _VERL,
          "z - m_g", _verl_grpo_nostd, singleton="z (mean 0 is substituted)",
          project="fullmean"),
    _spec("verl_rloo", "verl", "adv_estimator=rloo", _VERL,
          "z - (sum_g z - z)/(n_g - 1) = n_g (z - m_g)/(n_g - 1)",
          lambda z, i, c: _leave_one_out(z, i, c, "reward"), singleton="z (left unchanged)",
          project="grpo"),
    _spec("verl_reinforce_pp_baseline", "verl", "adv_estimator=reinforce_plus_plus_baseline",
          _VERL, "c = z - m_g; (c - mean_B c) / sqrt(var_B c + 1e-8), one token per response",
          _verl_rpp_baseline, epsilon=1e-8, placement="inside sqrt", bessel=True,
          statistics="batch", zero_variance="0 before whitening; then shifted by the batch mean",
          singleton="c = z (mean 0 is substituted)", min_batch=2,
          project="full mean, then whitened over the batch"),
    _spec("openrlhf_group_norm", "OpenRLHF", "--advantage_estimator group_norm", _ORLHF,
          "(z - m_g) / (s_g + 1e-9)", _openrlhf_group_norm, epsilon=1e-9,
          placement="added to std", bessel=True, singleton="NaN (Bessel std of one sample)",
          min_group=2, equal=True, project="std-normalised, full-mean numerator"),
    _spec("openrlhf_dr_grpo", "OpenRLHF",
          "--advantage_estimator dr_grpo (and reinforce_baseline at this stage)", _ORLHF,
          "z - m_g", _mean_only, equal=True, project="fullmean"),
    _spec("openrlhf_rloo", "OpenRLHF", "--advantage_estimator rloo", _ORLHF,
          "z - (sum_g z - z)/(n_g - 1)", lambda z, i, c: _leave_one_out(z, i, c, "zero"),
          singleton="division by zero (n_samples_per_prompt - 1 = 0)", min_group=2, equal=True,
          project="grpo"),
    _spec("trl_rloo", "TRL", "RLOOTrainer, normalize_advantages=False (default)", _TRL_RLOO,
          "z - (sum_g z - z)/(n_g - 1)", lambda z, i, c: _leave_one_out(z, i, c, "zero"),
          singleton="0", equal=True, project="grpo"),
    _spec("trl_rloo_normalized", "TRL", "RLOOTrainer, normalize_advantages=True", _TRL_RLOO,
          "a = leave-one-out; (a - mean_B a) / (s_B(a) + 1e-4)", _trl_rloo_normalized,
          epsilon=1e-4, placement="added to std", bessel=True, statistics="batch",
          zero_variance="0 before the batch normalisation", singleton="0 before normalisation",
          min_batch=2, equal=True, project="grpo, whitened over the batch"),
    _spec("grpo", "ustat-rl", "grpo_gradient (Algorithm 1)", _HERE,
          "z - (sum_g z - z)/(n_g - 1)", lambda z, i, c: _leave_one_out(z, i, c, "zero"),
          singleton="undefined", min_group=2, project="grpo"),
    _spec("fullmean", "ustat-rl", "fullmean_gradient", _HERE, "z - m_g", _mean_only,
          singleton="undefined", min_group=2, project="fullmean"),
    _spec("paper_algorithm2", "ustat-rl", "Algorithm 2 of the paper, all-equal groups zeroed",
          "docs/theory.md section 2", "(z - (sum_g z - z)/(n_g - 1)) / s_g, 0 when s_g = 0",
          _paper_algorithm2, bessel=True, zero_variance="0 (the rule chosen here)",
          singleton="undefined", min_group=2, project="std-normalised, leave-one-out numerator"),
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
                         f"must have the same size; got sizes from {counts.min()} to "
                         f"{counts.max()}")
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
    return spec.function(z, inverse, counts)


def _grouped(spec: ConventionSpec, rewards: np.ndarray) -> np.ndarray:
    """Advantages of many equal groups at once: ``rewards (M, G) -> (M, G)``, no validation."""
    M, G = rewards.shape
    inverse = np.repeat(np.arange(M), G)
    counts = np.full(M, G)
    return spec.function(rewards.reshape(-1).astype(np.float64), inverse, counts).reshape(M, G)
