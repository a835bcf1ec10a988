"""Multi-reward advantage rules: several reward channels per sample, combined in one of two orders.

A run with several reward functions (TRL's ``reward_funcs`` with ``reward_weights``, verl's and
NeMo-RL's ``gdpo``) scores every completion on ``K`` channels, ``rewards (n, K)``, and turns
them into one advantage per completion. Two orders exist (docs/conventions.md):

* **sum then normalise** (TRL's default ``multi_objective_aggregation="sum_then_normalize"``):
  the weighted sum ``s = sum_k w_k z_k`` goes through a single-reward rule (``trl_group``,
  ``trl_batch`` or ``trl_none`` by ``scale_rewards``);
* **normalise then sum** (GDPO, arXiv:2601.05242; TRL's ``"normalize_then_sum"``, verl's and
  NeMo-RL's ``gdpo``): each channel goes through a single-reward group rule, the results are
  summed with the weights, and the sum is whitened over the whole batch.

Both are one shape, a :class:`MultiChannelRule`: an optional per-channel stage and an optional
final stage, each an :class:`~ustat_rl.advantages.rule.AdvantageRule` of the one evaluator,

.. math::

    A = \\text{final}\\Big(\\sum_k w_k\\, \\text{channel}(z_{\\cdot k})\\Big),

so no formula is written twice: a stage is a registered rule or a rule of the same data type.
The exact finite-G moments for binary channels are in :mod:`ustat_rl.theory.multichannel`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .frameworks import KitWords, convention_rule, framework_provenance
from .parts import Provenance, Scaling
from .registry import get_rule
from .rule import AdvantageRule

__all__ = ["ORDERS", "MultiChannelRule", "MULTI_CHANNEL_RULES", "get_multichannel_rule",
           "register_multichannel_rule", "multichannel_rule_names"]

#: The two orders of combining the channels.
ORDERS = ("sum_then_normalize", "normalize_then_sum")


@dataclass(frozen=True)
class MultiChannelRule:
    """A rule for rewards with ``K`` channels: ``final(sum_k w_k channel(z_k))``.

    Attributes
    ----------
    name : str
        The key in :data:`MULTI_CHANNEL_RULES`.
    order : one of :data:`ORDERS`
    channel : AdvantageRule or None
        Applied to each channel's rewards on their own (``None``: the raw rewards are summed).
    final : AdvantageRule or None
        Applied to the weighted sum (``None``: the sum is the advantage).
    provenance : Provenance
    formula : str
        The advantage, in the notation of docs/conventions.md.
    min_channels : int
        The fewest channels the framework accepts.
    working_precision : str
    """

    name: str
    order: str
    channel: AdvantageRule | None
    final: AdvantageRule | None
    provenance: Provenance
    formula: str = ""
    min_channels: int = 1
    working_precision: str = "the rewards' dtype"

    def __post_init__(self):
        if self.order not in ORDERS:
            raise ValueError(f"`order` must be one of {ORDERS}, got {self.order!r}")
        for stage in ("channel", "final"):
            value = getattr(self, stage)
            if value is not None and not isinstance(value, AdvantageRule):
                raise TypeError(f"`{stage}` must be an AdvantageRule or None, got "
                                f"{type(value).__name__}")
        if self.channel is not None and self.channel.statistics != "group":
            raise ValueError("`channel` must be a rule of group statistics (each channel is "
                             "normalised within its group)")
        if self.channel is None and self.final is None:
            raise ValueError("a multi-channel rule needs a `channel` or a `final` stage")

    # ------------------------------------------------------------------ what the layers ask
    framework = property(lambda self: self.provenance.framework, doc="The framework.")
    option = property(lambda self: self.provenance.option, doc="The option that selects it.")
    repository = property(lambda self: self.provenance.repository, doc="owner/name on GitHub.")
    path = property(lambda self: self.provenance.path, doc="The file(s) it was read from.")
    commit = property(lambda self: self.provenance.commit, doc="The commit it was read at.")
    commit_date = property(lambda self: self.provenance.commit_date, doc="That commit's date.")

    @property
    def stages(self) -> tuple[AdvantageRule, ...]:
        """The stages that exist, channel stage first."""
        return tuple(s for s in (self.channel, self.final) if s is not None)

    @property
    def statistics(self) -> str:
        """``"batch"`` when the final stage takes a statistic of the whole batch, else
        ``"group"`` (then the advantage of a group depends on its own rewards only)."""
        return "batch" if any(s.statistics == "batch" for s in self.stages) else "group"

    @property
    def min_group_size(self) -> int:
        return max(s.min_group_size for s in self.stages)

    @property
    def min_batch_size(self) -> int:
        return max(s.min_batch_size for s in self.stages)

    @property
    def equal_group_sizes(self) -> bool:
        return any(s.equal_group_sizes for s in self.stages)

    @property
    def final_numerator(self) -> AdvantageRule | None:
        """The final stage without its division: what a batch spread divides (``None`` for a
        rule without a final stage)."""
        return None if self.final is None else replace(self.final, scaling=Scaling())

    @property
    def spread_of(self) -> str:
        """Which batch statistic a batch final stage divides by: ``"input"`` (the std of the
        weighted sums, TRL ``scale_rewards="batch"``) or ``"numerator"`` (whitening: the std of
        the final numerator, whose batch mean is subtracted too); ``""`` for group rules."""
        if self.final is None or self.final.statistics != "batch":
            return ""
        if self.final.scaling.kind == "batch std":
            return "input"
        if self.final.scaling.kind == "batch whitening":
            return "numerator"
        raise ValueError(f"rule {self.name!r}: a final {self.final.scaling.kind!r} stage has "
                         "no large-batch limit here")

    # ------------------------------------------------------------------ evaluation
    def combine(self, z, inverse, counts, weights) -> np.ndarray:
        """The final stage's input ``sum_k w_k channel(z_k)``, shape ``(n,)``, of validated
        rewards ``z (n, K)`` in groups ``inverse`` of sizes ``counts``."""
        if self.channel is None:
            return z @ weights
        return sum(w * self.channel.apply(z[:, k], inverse, counts)
                   for k, w in enumerate(weights))

    def apply(self, z, inverse, counts, weights) -> np.ndarray:
        """Advantages ``(n,)`` of validated rewards ``z (n, K)`` (see :meth:`combine`)."""
        combined = self.combine(z, inverse, counts, weights)
        return combined if self.final is None else self.final.apply(combined, inverse, counts)

    def combined_grouped(self, rows, weights) -> np.ndarray:
        """The final stage's input for ``M`` equal groups: ``rows (M, G, K) -> (M, G)``."""
        rows = np.asarray(rows, dtype=np.float64)
        if self.channel is None:
            return rows @ weights
        return sum(w * self.channel.grouped(rows[:, :, k]) for k, w in enumerate(weights))

    def grouped(self, rows, weights) -> np.ndarray:
        """Advantages of ``M`` equal groups: ``rows (M, G, K) -> (M, G)``, group rules only."""
        if self.statistics != "group":
            raise ValueError(f"rule {self.name!r} uses batch statistics, so groups are not "
                             "independent; evaluate whole batches with `batched`")
        combined = self.combined_grouped(rows, weights)
        return combined if self.final is None else self.final.grouped(combined)

    def batched(self, rewards, weights) -> np.ndarray:
        """Advantages of ``R`` independent batches: ``rewards (R, B, G, K) -> (R, B, G)``.

        Batch statistics are taken within each batch, never across them.
        """
        rewards = np.asarray(rewards, dtype=np.float64)
        R, B, G, K = rewards.shape
        combined = self.combined_grouped(rewards.reshape(R * B, G, K), weights)
        if self.final is None:
            return combined.reshape(R, B, G)
        if self.final.statistics == "group":
            return self.final.grouped(combined).reshape(R, B, G)
        inverse, counts = np.repeat(np.arange(B), G), np.full(B, G)
        # once per distinct batch: the final stage is a function of the batch's values
        rows, which = np.unique(combined.reshape(R, B * G), axis=0, return_inverse=True)
        out = np.stack([self.final.apply(row, inverse, counts) for row in rows])
        return out[which.reshape(-1)].reshape(R, B, G)

    def check_weights(self, weights, n_channels: int) -> np.ndarray:
        """``weights`` as a finite float64 ``(K,)`` array (ones when ``None``)."""
        if weights is None:
            return np.ones(n_channels)
        w = np.asarray(weights)
        if not np.issubdtype(w.dtype, np.number) or np.iscomplexobj(w):
            raise TypeError(f"`weights` must hold real numbers, got dtype {w.dtype}")
        w = w.astype(np.float64)
        if w.shape != (n_channels,):
            raise ValueError(f"`weights` must have one entry per channel, shape ({n_channels},), "
                             f"got {w.shape}")
        if not np.all(np.isfinite(w)):
            raise ValueError("`weights` must be finite (no NaN or inf)")
        return w

    def check_inputs(self, rewards, group_ids, weights=None):
        """``(z (n, K), inverse, counts, weights)`` validated, or a one-line error naming the
        parameter."""
        z = np.asarray(rewards)
        if z.ndim != 2 or z.shape[0] == 0:
            raise ValueError(f"`rewards` must be a non-empty (n, K) array, one column per reward "
                             f"channel, got shape {z.shape}")
        if z.shape[1] < self.min_channels:
            raise ValueError(f"rule {self.name!r} needs at least {self.min_channels} reward "
                             f"channels, got {z.shape[1]}")
        if not np.issubdtype(z.dtype, np.number) or np.iscomplexobj(z):
            raise TypeError(f"`rewards` must hold real numbers, got dtype {z.dtype}")
        z = z.astype(np.float64)
        if not np.all(np.isfinite(z)):
            raise ValueError("`rewards` must be finite (no NaN or inf)")
        w = self.check_weights(weights, z.shape[1])
        try:  # every stage's own rules on group sizes and ids
            inverse, counts = [s.check_inputs(z[:, 0], group_ids)[1:] for s in self.stages][0]
        except ValueError as exc:
            raise ValueError(f"rule {self.name!r}: {exc}") from None
        return z, inverse, counts, w

    def advantages(self, rewards, group_ids, weights=None) -> np.ndarray:
        """The per-sample advantages ``(n,)`` of ``rewards (n, K)`` in groups ``group_ids (n,)``
        with channel weights ``weights (K,)`` (ones by default).

        Examples
        --------
        >>> rule = get_multichannel_rule("trl_sum_then_normalize")
        >>> r = [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
        >>> [round(float(a), 4) for a in rule.advantages(r, [0, 0, 0, 0], [1.0, 0.5])]
        [0.3872, -0.3872, -1.1617, 1.1617]
        """
        z, inverse, counts, w = self.check_inputs(rewards, group_ids, weights)
        return self.apply(z, inverse, counts, w)


def _at(pin, path):
    return Provenance(pin[0], pin[1], f"{path} ({pin[2]} {pin[3][:8]})", pin[2], path, pin[3],
                      pin[4])


_TRL = ("TRL", 'GRPOTrainer, multi_objective_aggregation="{}"{}', "huggingface/trl",
        "f2cd57710ae345ea6428ae95363267fcf38a3dc8", "2026-07-24")
_TRL_PATH = "trl/trainer/grpo_trainer.py"
_SCALES = {"group": ("trl_group", ' (default), scale_rewards="group"', "s_g(s) + 1e-4"),
           "batch": ("trl_batch", ', scale_rewards="batch"', "s_B(s) + 1e-4"),
           "none": ("trl_none", ', scale_rewards="none"', "")}

#: TRL's batch step of normalize_then_sum: ``(r - mean_B r) / (s_B(r) + 1e-4)``, Bessel std.
_TRL_WHITEN = convention_rule(
    "trl_normalize_then_sum:batch", framework_provenance(
        "TRL", "normalize_then_sum, batch step", "huggingface/trl", _TRL_PATH, _TRL[3], _TRL[4]),
    "(r - mean_B r) / (s_B(r) + 1e-4)", KitWords(
        baseline="none", scale="whiten", epsilon=1e-4, epsilon_placement="added to std",
        bessel=True), min_batch_size=2, equal_group_sizes=True, working_precision="float32")
#: NeMo-RL's batch step of gdpo: ``(r - mean r) / std(r)`` (Bessel), ``r - mean r`` if std is 0.
_NEMO_WHITEN = convention_rule(
    "nemo_rl_gdpo:batch", framework_provenance(
        "NeMo-RL", "gdpo, batch step", "NVIDIA-NeMo/RL",
        "nemo_rl/algorithms/advantage_estimator.py", "7ea279abfbeb698b092856d0dab61e7cf39bc909",
        "2026-08-22"),
    "(r - mean_B r) / s_B(r); r - mean_B r where s_B(r) = 0", KitWords(
        baseline="none", scale="whiten", bessel=True, zero_std="keep numerator"),
    min_batch_size=2)

_RULES = [
    *(MultiChannelRule(f"trl_sum_then_normalize{'' if scale == 'group' else '_' + scale}",
                       "sum_then_normalize", None, get_rule(stage),
                       _at((_TRL[0], _TRL[1].format("sum_then_normalize", option), *_TRL[2:]),
                           _TRL_PATH),
                       "s = sum_k w_k z_k; " + (f"(s - m_g(s)) / ({div})" if div
                                                else "s - m_g(s)"),
                       working_precision="float32")
      for scale, (stage, option, div) in _SCALES.items()),
    MultiChannelRule("trl_normalize_then_sum", "normalize_then_sum", get_rule("trl_group"),
                     _TRL_WHITEN,
                     _at((_TRL[0], _TRL[1].format("normalize_then_sum", "") + " (scale_rewards "
                          "is not read)", *_TRL[2:]), _TRL_PATH),
                     "r = sum_k w_k (z_k - m_g(z_k)) / (s_g(z_k) + 1e-4); "
                     "(r - mean_B r) / (s_B(r) + 1e-4)", working_precision="float32"),
    MultiChannelRule("verl_gdpo", "normalize_then_sum", get_rule("verl_grpo"),
                     get_rule("verl_reinforce_pp"),
                     _at(("verl", "algorithm.adv_estimator=gdpo, norm_adv_by_std_in_grpo=True "
                          "(default), algorithm.gdpo_reward_weights", "verl-project/verl",
                          "1dda039b9c6311889a9c9a26040677e1254814f9", "2026-08-22"),
                         "verl/trainer/ppo/core_algos.py, verl/utils/torch_functional.py"),
                     "r = sum_k w_k (z_k - m_g(z_k)) / (s_g(z_k) + 1e-6); (r - mean_B r) / "
                     "sqrt(var_B r + 1e-8) (masked_whiten, one token per response)",
                     working_precision="float32 (weights and channel rewards)"),
    MultiChannelRule("nemo_rl_gdpo", "normalize_then_sum", get_rule("nemo_rl_grpo"),
                     _NEMO_WHITEN,
                     _at(("NeMo-RL", "grpo.adv_estimator.name=gdpo (use_leave_one_out_baseline"
                          "=true, normalize_rewards=true, the defaults), reward_weights",
                          "NVIDIA-NeMo/RL", "7ea279abfbeb698b092856d0dab61e7cf39bc909",
                          "2026-08-22"),
                         "nemo_rl/algorithms/advantage_estimator.py, nemo_rl/algorithms/utils.py"),
                     "r = sum_k w_k nemo_rl_grpo(z_k); (r - mean_B r) / s_B(r), r - mean_B r "
                     "where s_B(r) = 0", min_channels=2),
]

#: The multireward-grpo package's per-group standardisation, ``(z - m_g)/(s_pop + 1e-8)``.
_MRG = ("yiqiao-yin/multireward-grpo", "src/multireward_grpo/advantage.py",
        "c9fb735c1c42cc9becb6877e4aba91445320c67d", "")
_MRG_STD = convention_rule(
    "multireward_grpo:std", framework_provenance("multireward-grpo", "compute_advantage", *_MRG),
    "(z - m_g) / (s_pop,g + 1e-8)", KitWords(scale="group", bessel=False, epsilon=1e-8,
                                             epsilon_placement="added to std"),
    equal_group_sizes=True)
for _mode, _order in (("na", "normalize_then_sum"), ("an", "sum_then_normalize")):
    _RULES.append(MultiChannelRule(
        f"multireward_grpo_{_mode}", _order, _MRG_STD if _mode == "na" else None,
        None if _mode == "na" else _MRG_STD,
        _at(("multireward-grpo", f'compute_advantage(rewards, w, mode="{_mode}")', _MRG[0],
             _MRG[2], _MRG[3]), _MRG[1]),
        "sum_k w_k (z_k - m_g(z_k)) / (s_pop,g(z_k) + 1e-8)" if _mode == "na" else
        "s = sum_k w_k z_k; (s - m_g(s)) / (s_pop,g(s) + 1e-8)"))

#: Every multi-channel rule, by name.
MULTI_CHANNEL_RULES: dict[str, MultiChannelRule] = {rule.name: rule for rule in _RULES}
_BUILT_IN = frozenset(MULTI_CHANNEL_RULES)


def multichannel_rule_names() -> tuple[str, ...]:
    """The registered multi-channel rule names, in registration order."""
    return tuple(MULTI_CHANNEL_RULES)


def get_multichannel_rule(estimator, parameter: str = "estimator") -> MultiChannelRule:
    """The :class:`MultiChannelRule` called ``estimator`` (a rule is returned as is); ``ValueError``
    naming ``parameter`` and listing the names otherwise."""
    if isinstance(estimator, MultiChannelRule):
        return estimator
    if not isinstance(estimator, str) or estimator not in MULTI_CHANNEL_RULES:
        from .registry import unknown_name

        raise ValueError(unknown_name(parameter, estimator, multichannel_rule_names()))
    return MULTI_CHANNEL_RULES[estimator]


def register_multichannel_rule(estimator: MultiChannelRule, *, replace_existing: bool = False
                               ) -> MultiChannelRule:
    """Add ``estimator`` to :data:`MULTI_CHANNEL_RULES` so every layer accepts its name;
    returns it."""
    if not isinstance(estimator, MultiChannelRule):
        raise TypeError(f"`estimator` must be a MultiChannelRule, got {type(estimator).__name__}")
    if estimator.name in _BUILT_IN or (estimator.name in MULTI_CHANNEL_RULES
                                       and not replace_existing):
        raise ValueError(f"`estimator` {estimator.name!r} is already registered")
    MULTI_CHANNEL_RULES[estimator.name] = estimator
    return estimator
