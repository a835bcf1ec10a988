"""Every registered convention's exact finite-G moments against enumeration (docs/theory.md C46).

``ustat_rl.theory.advantage.advantage_moments`` gives the mean factor and the second moment of
``g_hat(x) = (1/G) sum_g a(Z_g, M) W_g`` for binary rewards from the rule's two-point table in
``O(G)``. The route a user's per-sample advantages take is the rule's own evaluation
(``rule_gradient``, the same function the trainers' conventions are checked with). This claim
runs both on every rule registered when it runs (the registry grows: it iterates over
``ustat_rl.advantages.RULES``, not a list) whose statistics are per group and need no reference
value, on a softmax bandit with Bernoulli rewards, enumerating every one of the ``(2K)^G``
outcomes of a group; it checks that each rule's epsilon is the one its formula states; and it
compares every convention of the table with its framework's formula written out
(:mod:`ustat_rl.claims.literal_forms`), a route that reads none of the rule's data, through the
conformance kit's adapter and comparison on fixed batches of every kind the kit draws.
Deterministic: exact comparisons and the kit's rounding bound, no false-failure rate.
"""

from __future__ import annotations

import numpy as np

from ...policies.softmax import SoftmaxBandit
from ..registry import check_exact, check_true, register

#: Group sizes enumerated (those below a rule's smallest group are skipped): (2K)^G outcomes.
ENUM_GROUP_SIZES = (2, 3, 4, 5)
#: The bandit: 2 prompts x 3 actions with Bernoulli rewards (binary Z), one action certain to
#: fail and one near-certain to succeed, so groups with every success count occur.
ENUM_LOGITS = ((0.4, -0.3, 0.0), (-0.2, 0.5, 0.1))
ENUM_REWARD_PROB = ((0.9, 0.3, 0.0), (0.5, 0.2, 0.97))
#: Relative tolerance: float64 sums of at most 6^5 outcomes; a rule computing in float32
#: (``working_precision``) rounds its advantages by about 6e-8.
ENUM_RTOL, ENUM_RTOL_FLOAT32 = 1e-10, 1e-5

#: Group sizes (the rule's smallest ones) enumerated with the advantages from the framework's
#: formula written out: 36 and 216 outcomes per prompt at G = 2, 3 (G = 4, 5 would add 8 s).
LITERAL_ENUM_SIZES = 2

#: Batches per rule of the comparison with the frameworks' literal formulas, and the seed that
#: draws them (fixed: the comparison is deterministic, its tolerance the kit's rounding bound).
LITERAL_BATCHES, LITERAL_SEED = 16, 4601


def kit_batches(estimator, contiguous: bool, count: int = LITERAL_BATCHES,
                seed: int = LITERAL_SEED):
    """Deterministic batches of the kinds the conformance kit draws, valid for ``estimator``.

    Groups of 1 to 6 rewards (from the rule's smallest group; equal sizes where the rule needs
    them), each random in [-10, 10], two values tied, nearly tied (spreads 1e-3, 1e-5, 1e-9),
    all equal or binary; every third batch offset by 1e6, every other one float32; ids of
    either sign, in contiguous groups (``contiguous``, as a reshape into ``(-1, G)`` needs) or
    shuffled. Every fourth batch starts with a group of the smallest size (singletons where the
    rule allows them). Returns a list of ``(rewards (n,), group_ids (n,))``.
    """
    rng = np.random.default_rng(seed)
    low = max(estimator.min_group_size, 1)
    out = []
    for i in range(count):
        n_groups = 1 + i % 4
        if estimator.equal_group_sizes:
            sizes = [low if i % 4 == 0 else int(rng.integers(low, 7))] * n_groups
        else:
            sizes = [int(rng.integers(low, 7)) for _ in range(n_groups)]
            sizes[0] = low if i % 4 == 0 else sizes[0]
        while sum(sizes) < estimator.min_batch_size:
            sizes = [s + 1 for s in sizes]
        groups = []
        for j, n in enumerate(sizes):
            kind = (i + j) % 5
            if kind == 0:
                values = rng.uniform(-10, 10, n)
            elif kind == 1:
                values = rng.choice(rng.uniform(-10, 10, 2), n)
            elif kind == 2:
                values = rng.uniform(-10, 10) + 10.0 ** -rng.choice([3, 5, 9]) * rng.integers(0, 3, n)
            elif kind == 3:
                values = np.full(n, rng.uniform(-10, 10))
            else:
                values = rng.integers(0, 2, n).astype(np.float64)
            groups.append(values)
        z = np.concatenate(groups) + (1e6 if i % 3 == 2 else 0.0)
        ids = np.repeat(rng.choice(np.arange(-50, 50), n_groups, replace=False), sizes)
        order = np.arange(z.size) if contiguous else rng.permutation(z.size)
        out.append((z[order].astype(np.float32 if i % 2 else np.float64), ids[order]))
    return out


def literal_failures(estimator, form, batches=None) -> list:
    """The kit's failures of ``form`` (a :class:`~.literal_forms.LiteralForm`) against the
    registry's ``estimator`` on :func:`kit_batches`: each batch goes through the kit's adapter for
    the
    form's signature and the kit's comparison (its documented rounding bound)."""
    from ...conformance.kit import check_batch

    if batches is None:
        batches = kit_batches(estimator, contiguous=form.signature == "trl")
    return [f for f in (check_batch(form.fn, estimator, z, ids, signature=form.signature)
                        for z, ids in batches) if f is not None]


def epsilon_text(epsilon: float) -> str:
    """``epsilon`` as the formulas write it: ``1e-4``, ``1e-6``, ``2.5e-3``."""
    mantissa, exponent = f"{epsilon:.6e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def exact_rules():
    """``(covered, others)``: registered rules with exact binary finite-G moments (per-group
    statistics, no reference value), and the names of the rest with the reason."""
    from ...advantages import RULES

    covered, others = [], []
    for rule in RULES.values():
        if rule.statistics != "group":
            others.append(f"{rule.name} (batch statistics)")
        elif rule.centring.reference_source is not None:
            others.append(f"{rule.name} (subtracts {rule.centring.reference_source})")
        else:
            covered.append(rule)
    return covered, others


def enumerated_moments(bandit: SoftmaxBandit, prompt: int, group_size: int, estimator):
    """``(E g_hat(x), E||g_hat(x)||^2)`` over all outcomes of a group, by enumeration."""
    from ...policies.enumeration import enumerate_prompt_estimates

    values, prob = enumerate_prompt_estimates(bandit, prompt, group_size, estimator.name)  # (M, K)
    return prob @ values, prob @ np.sum(values**2, axis=1)


def literal_enumerated_moments(bandit: SoftmaxBandit, prompt: int, group_size: int, form):
    """``(E g_hat(x), E||g_hat(x)||^2)`` over all outcomes of a group, by enumeration, each
    outcome's advantages from the framework's formula written out (``form``, a
    :class:`~ustat_rl.claims.literal_forms.LiteralForm`), not from the rule's data: every outcome
    a group of one batch handed to the formula at once."""
    from ...conformance.adapters import adapt
    from ...policies.enumeration import enumerate_prompt_estimates

    plain = adapt(form.fn, form.signature)

    def written_out(score, reward):  # (M, G, K), (M, G) -> (M, K)
        M, G = reward.shape
        adv = plain(np.ascontiguousarray(reward, dtype=np.float64).reshape(-1),
                    np.repeat(np.arange(M), G)).reshape(M, G)
        return np.einsum("mg,mgk->mk", adv, score) / G

    values, prob = enumerate_prompt_estimates(bandit, prompt, group_size, written_out)
    return prob @ values, prob @ np.sum(values**2, axis=1)


@register("C46", "Beyond the paper: every registered per-group convention's exact finite-G mean "
          "and second moment for binary rewards equal the enumeration of its own advantages, "
          "its epsilon is the one its formula states, and every framework option's advantages "
          "are its framework's formula as written",
          "derived (docs/theory.md C46; section 7's exact moments of any group-relative "
          "advantage)",
          "advantage_moments against sums over all (2K)^G outcomes of rule_gradient on a "
          "softmax bandit, G = 2..5, for every rule in RULES; each convention against a literal "
          "transcription of its framework's formula through the conformance kit's comparison")
def check_c46(ctx) -> list:
    from ...theory.advantage import advantage_moments

    bandit = SoftmaxBandit(np.array(ENUM_LOGITS), np.array(ENUM_REWARD_PROB))
    moments = bandit.moments()
    covered, others = exact_rules()
    checks = [check_true(f"{len(covered)} registered rules have exact binary moments",
                         len(covered) > 0, float(len(covered)),
                         note="not covered: " + ", ".join(others))]
    for rule in covered:
        rtol = ENUM_RTOL if rule.working_precision == "the rewards' dtype" else ENUM_RTOL_FLOAT32
        exact_mean, exact_second, enum_mean, enum_second = [], [], [], []
        sizes = [G for G in ENUM_GROUP_SIZES if G >= rule.min_group_size]
        for G in sizes:
            out = advantage_moments(moments, rule, G)
            for x in range(bandit.n_prompts):
                mean, second = enumerated_moments(bandit, x, G, rule)
                exact_mean.append(out.mean_factor[x] * bandit.grad_per_prompt[x])
                exact_second.append(out.second_moment[x])
                enum_mean.append(mean)
                enum_second.append(second)
        scale = float(np.max(np.abs(exact_mean)))
        checks += _literal_side_checks(bandit, rule, sizes, exact_mean, exact_second, rtol, scale)
        checks.append(check_exact(f"{rule.name}: E g_hat(x) = c(x) g(x), G = {sizes}",
                                  np.array(enum_mean), np.array(exact_mean), rtol=rtol,
                                  atol=rtol * scale, note="both prompts"))
        checks.append(check_exact(f"{rule.name}: E||g_hat(x)||^2, G = {sizes}",
                                  np.array(enum_second), np.array(exact_second), rtol=rtol,
                                  atol=0.0, note="both prompts"))
        if rule.scaling.epsilon > 0:
            text = epsilon_text(rule.scaling.epsilon)
            checks.append(check_true(f"{rule.name}: the epsilon {text} is the formula's",
                                     text in rule.formula.replace("1e-0", "1e-"),
                                     rule.scaling.epsilon, note=f"formula: {rule.formula}"))
    return checks + literal_checks()


def _literal_side_checks(bandit, rule, sizes, exact_mean, exact_second, rtol, scale) -> list:
    """The exact moments against an enumeration whose advantages come from the framework's
    formula written out (a side that shares none of the rule's code), for a rule that has one."""
    from ..literal_forms import LITERAL_FORMS

    form = LITERAL_FORMS.get(rule.name)
    if form is None:
        return []
    means, seconds = [], []
    sizes = sizes[:LITERAL_ENUM_SIZES]
    for G in sizes:
        for x in range(bandit.n_prompts):
            mean, second = literal_enumerated_moments(bandit, x, G, form)
            means.append(mean)
            seconds.append(second)
    where = f"G = {sizes}, the advantages from {form.repository or 'the paper'}'s formula"
    kept = len(sizes) * bandit.n_prompts  # the exact moments' first entries are these sizes'
    return [check_exact(f"{rule.name}: E g_hat(x) = c(x) g(x), {where}", np.array(means),
                        np.array(exact_mean[:kept]), rtol=rtol, atol=rtol * scale),
            check_exact(f"{rule.name}: E||g_hat(x)||^2, {where}", np.array(seconds),
                        np.array(exact_second[:kept]), rtol=rtol, atol=0.0)]


def literal_checks() -> list:
    """Every convention of the table against its framework's formula written out
    (:mod:`ustat_rl.claims.literal_forms`), through the kit's adapter and comparison, with the
    negative controls: a Bessel correction and a singleton rule lost from the registry."""
    import dataclasses

    from ...advantages import get_rule
    from ...advantages.conventions import CONVENTION_NAMES
    from ..literal_forms import LITERAL_FORMS

    missing = [name for name in CONVENTION_NAMES if name not in LITERAL_FORMS]
    checks = [check_true(f"each of the {len(CONVENTION_NAMES)} conventions of the table has a "
                         f"literal form", not missing, float(len(missing)),
                         note="missing: " + (", ".join(missing) or "none"))]
    for name, form in LITERAL_FORMS.items():
        rule = get_rule(name)  # the registry's rule when the claim runs
        pinned = (rule.repository or "", rule.commit or "")
        checks.append(check_true(f"{name}: its literal form was read at the registry's commit",
                                 pinned == (form.repository, form.commit), float(pinned == (
                                     form.repository, form.commit)),
                                 note=f"registry {pinned}, literal form "
                                      f"{(form.repository, form.commit)}"))
        failures = literal_failures(rule, form)
        checks.append(check_true(
            f"{name}: the registry's advantages are the {rule.framework} formula as written, "
            f"{LITERAL_BATCHES} batches ({form.signature} signature)", not failures,
            float(len(failures)), note=failures[0].message if failures else
            "within the conformance kit's rounding bound on every sample"))
    trl, verl = get_rule("trl_group"), get_rule("verl_grpo")
    controls = {
        "trl_group with the population std": (dataclasses.replace(
            trl, scaling=dataclasses.replace(trl.scaling, bessel=False)), "trl_group"),
        "verl_grpo giving a singleton 0": (dataclasses.replace(
            verl, centring=dataclasses.replace(verl.centring, singleton="zero")), "verl_grpo"),
    }
    for label, (wrong, name) in controls.items():
        rejected = len(literal_failures(wrong, LITERAL_FORMS[name]))
        checks.append(check_true(f"negative control: {label} in the registry is rejected by the "
                                 f"literal form", rejected > 0, float(rejected),
                                 note=f"{rejected} of {LITERAL_BATCHES} batches rejected"))
    return checks
