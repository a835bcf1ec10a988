"""A causal language model's pilot, end to end, on every projection route (C80).

:func:`~ustat_rl.scores.causal_lm.causal_lm_pilot` is how a user turns their own model into a
pilot for ``ustat-rl gstar``; no other claim runs it. Here it runs on a small float64 causal LM
whose layers include a module no fast projector knows (a gate ``h * sigmoid(h W)``, which the
factored sketch must take by its exact fallback, :class:`~ustat_rl.scores.projectors.Module`),
at temperature 0.8 with an end token, three prompts of unequal length and ``G = 4``:

* **the policy's log-probability**: :func:`~ustat_rl.scores.causal_lm.causal_lm_log_prob` against
  the answer tokens' ``log softmax(logits / T)`` summed position by position in this module;
* **the sampler's law**: :func:`~ustat_rl.scores.causal_lm.sample_answers` draws answers of up to
  two tokens, whose frequencies are set against the exact probability of each of the 73 possible
  answers (chi-square, cells pooled to an expected count of at least 10; fails below
  ``p = 1e-5``, its false-failure rate); the negative control scores the same draws against the
  probabilities at temperature 1, which the same test must reject;
* **the pilot, every route**: the answers each route's pilot drew (read from the reward function,
  which receives them) are the same on every route; the rewards and prompt ids are the reward
  function's and the prompts'; the full route's scores equal per-answer gradients of the
  written-out log-probability by one backward pass each (no ``torch.func``), and the dense, jvp
  and factored routes' scores equal those times the route's materialised projection
  (:func:`~ustat_rl.scores.sketch.torch_projection_matrix`,
  :func:`~ustat_rl.scores.forward_sketch.jvp_projection_matrix`,
  :func:`~ustat_rl.scores.factored.factored_projection_matrix`); exact to float64 rounding. Two
  negative controls: the written-out scores at temperature 1 against the full route, and the
  dense route against another seed's matrix, each rejected by the same comparison;
* **each projection's law**: a projection only keeps the kernels unbiased if ``E[R^T R] = I``
  (docs/theory.md section 7). The dense and jvp matrices and the numpy
  :func:`~ustat_rl.scores.sketch.projection_matrix` behind
  :func:`~ustat_rl.scores.sketch.project_scores`, drawn with ``k`` i.i.d. rows, give ``k``
  independent replicates ``k (r.W_i)(r.W_j)`` of each inner product ``<W_i, W_j>`` of the pilot's
  exact scores, both kinds of entries: compared at ``Z_STRICT`` (4.5 se, 6.8e-6 two-sided each;
  18 comparisons); the negative control, rows scaled by ``sqrt(1.25)`` (a 25% error of every
  squared norm), is rejected by the same comparison. Power: the squared norms' standard error is
  ``sqrt(2/k)`` of the value for Gaussian rows, so at ``k = 4096`` an error of about 10% is seen;
  the cross inner product, of two nearly orthogonal scores, only about 45% (docs/power.md).

The key-value cache branch of the sampler is not reached (the model takes no cache); the tests
run it on a cached model (``tests/scores/test_causal_lm.py``).
"""

from __future__ import annotations

import math

import numpy as np

from ...tolerances import Z_STRICT
from ..registry import check_close, check_exact, check_true, register

__all__ = ["gated_lm", "written_log_prob", "written_scores", "answer_probabilities",
           "outcome_counts", "TEMPERATURE", "EOS", "PROMPTS"]

#: Vocabulary, embedding width and hidden width of :func:`gated_lm`; token 8 ends an answer.
VOCAB, WIDTH, HIDDEN, EOS = 9, 5, 6, 8
#: The policy's temperature (not 1, so a route that drops it is seen).
TEMPERATURE = 0.8
#: The pilot's prompts, of unequal lengths.
PROMPTS = ((1, 2), (3, 4, 5), (6,))
#: Answers per prompt and the longest answer of the pilot.
GROUP, MAX_NEW = 4, 3
#: The projection of the pilot's sketched routes: ``k`` rows (the factored route in 3 blocks).
SKETCH_K, SKETCH_BLOCKS, SKETCH_SEED = 12, 3, 5
#: Answers drawn for the sampler's law (quick, full) and their longest length.
LAW_DRAWS, LAW_MAX_NEW = (4000, 16000), 2
#: The chi-square test's level: the sampler's law fails below it (its false-failure rate).
GOF_LEVEL = 1e-5
#: Expected count below which chi-square cells are pooled.
GOF_MIN_EXPECTED = 10.0
#: Rows of each projection whose law is checked (quick, full).
LAW_ROWS = (4096, 16384)
#: Pairs ``(i, j)`` of the pilot's answers whose inner products the projections' law is read on.
LAW_PAIRS = ((0, 0), (5, 5), (0, 5))
#: The exact comparisons' tolerances (float64 rounding).
RTOL, ATOL = 1e-10, 1e-12


def gated_lm():
    """A float64 causal LM: embedding, layer norm, a linear layer, a gate ``h * sigmoid(h W)``
    (a module no fast projector covers) and a head; parameters drawn from a fixed generator."""
    import torch

    class Gate(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(width, width))

        def forward(self, h):
            return h * torch.sigmoid(h @ self.weight)

    class GatedLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, WIDTH)
            self.norm = torch.nn.LayerNorm(WIDTH)
            self.mix = torch.nn.Linear(WIDTH, HIDDEN)
            self.gate = Gate(HIDDEN)
            self.head = torch.nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens):
            h = self.norm(self.embed(tokens)).cumsum(dim=1)  # causal: t sees tokens <= t
            return self.head(self.gate(torch.tanh(self.mix(h))))

    gen = torch.Generator().manual_seed(8001)
    with torch.random.fork_rng(devices=[]):  # the modules' default init leaves no trace
        model = GatedLM().double()
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(0.9 * torch.randn(param.shape, generator=gen, dtype=torch.float64))
    return model


def written_log_prob(model, prompt, answer, mask, temperature: float):
    """``sum_j mask_j log softmax(logits_{t+j-1} / T)[answer_j]``, position by position (a
    differentiable scalar tensor)."""
    import torch

    tokens = torch.tensor(list(prompt) + list(answer))[None]
    logits = model(tokens)[0]  # (t + A, V)
    total = logits.new_zeros(())
    for j, (token, keep) in enumerate(zip(answer, mask)):
        if keep:
            row = logits[len(prompt) + j - 1] / temperature
            total = total + row[token] - torch.logsumexp(row, dim=0)
    return total


def written_scores(model, answers, temperature: float) -> np.ndarray:
    """Per answer ``(prompt, answer, mask)``, the gradient of :func:`written_log_prob` by one
    backward pass, flattened in ``named_parameters`` order: ``(n, d)``."""
    import torch

    params = list(model.parameters())
    rows = []
    for prompt, answer, mask in answers:
        grads = torch.autograd.grad(written_log_prob(model, prompt, answer, mask, temperature),
                                    params)
        rows.append(torch.cat([g.reshape(-1) for g in grads]).detach().numpy())
    return np.array(rows)


def answer_probabilities(model, prompt, temperature: float) -> dict:
    """The exact probability of every answer of up to :data:`LAW_MAX_NEW` tokens that ends at
    :data:`EOS` or at the length limit: ``{(first, second or None): probability}``."""
    import torch

    out = {}
    with torch.no_grad():
        for first in range(VOCAB):
            if first == EOS:
                out[(first, None)] = math.exp(float(written_log_prob(
                    model, prompt, (first, 0), (1, 0), temperature)))
                continue
            for second in range(VOCAB):
                out[(first, second)] = math.exp(float(written_log_prob(
                    model, prompt, (first, second), (1, 1), temperature)))
    return out


def outcome_counts(answers, mask) -> dict:
    """Counts of each answer drawn: ``{(first, second or None): count}``."""
    counts: dict = {}
    for (first, second), (_, keep) in zip(answers.tolist(), mask.tolist()):
        key = (first, second if keep else None)
        counts[key] = counts.get(key, 0) + 1
    return counts


def gof_pvalue(counts: dict, probs: dict) -> float:
    """Chi-square goodness of fit of ``counts`` to ``probs``, cells of expected count below
    :data:`GOF_MIN_EXPECTED` pooled (in increasing order of expectation); NaN for an answer
    outside the support."""
    from scipy.stats import chi2

    if set(counts) - set(probs):
        return float("nan")
    n = sum(counts.values())
    cells = sorted(probs, key=lambda key: probs[key])
    observed, expected, pool_o, pool_e = [], [], 0.0, 0.0
    for key in cells:
        pool_o += counts.get(key, 0)
        pool_e += n * probs[key]
        if pool_e >= GOF_MIN_EXPECTED:
            observed.append(pool_o)
            expected.append(pool_e)
            pool_o = pool_e = 0.0
    if pool_e > 0 and expected:  # what is left joins the last cell
        observed[-1] += pool_o
        expected[-1] += pool_e
    observed, expected = np.array(observed), np.array(expected)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    return float(chi2.sf(stat, len(expected) - 1))


def _sampler_checks(ctx, model) -> list:
    import torch

    from ...scores.causal_lm import Sampling, sample_answers

    prompt = PROMPTS[1]
    n = ctx.reps(*LAW_DRAWS)
    seed = int(ctx.seed_for("C80", 1).generate_state(1)[0])
    sampling = Sampling(n, LAW_MAX_NEW, temperature=TEMPERATURE, eos_token_id=EOS)
    answers, mask = sample_answers(model, torch.tensor(prompt), sampling,
                                   torch.Generator().manual_seed(seed))
    counts = outcome_counts(answers, mask)
    probs = answer_probabilities(model, prompt, TEMPERATURE)
    p_value = gof_pvalue(counts, probs)
    control = gof_pvalue(counts, answer_probabilities(model, prompt, 1.0))
    return [
        check_true(f"sample_answers' frequencies over {n} answers = the exact probabilities of "
                   f"the {len(probs)} answers at T = {TEMPERATURE:g} (chi-square p >= "
                   f"{GOF_LEVEL:g})", p_value >= GOF_LEVEL, p_value, evidence="monte-carlo",
                   note=f"false-failure rate {GOF_LEVEL:g}; measured: the p-value"),
        check_true("negative control: the same draws against the probabilities at T = 1 are "
                   "rejected by the same test", control < GOF_LEVEL, control,
                   evidence="monte-carlo", note="a power check; measured: the p-value"),
    ]


def _pilot(model, seed: int, spec, route: str):
    """The pilot of :data:`PROMPTS` on one route, and the answers its reward function saw."""
    from ...scores.causal_lm import Sampling, causal_lm_pilot

    seen = []

    def reward_fn(index, ids):
        seen.append((index, list(ids)))
        return float(sum(ids) % 3 == 0) + 0.25 * len(ids)

    sampling = Sampling(GROUP, MAX_NEW, seed=seed, temperature=TEMPERATURE, eos_token_id=EOS)
    rollouts = causal_lm_pilot(model, [list(p) for p in PROMPTS], reward_fn, sampling,
                               sketch=spec, route=route, chunk_size=3)
    return rollouts, seen


def _padded(seen) -> list:
    """``(prompt, answer, mask)`` per answer the reward function saw, padded to
    :data:`MAX_NEW` with token 0 and mask 0."""
    out = []
    for index, ids in seen:
        pad = MAX_NEW - len(ids)
        out.append((PROMPTS[index], tuple(ids) + (0,) * pad, (1,) * len(ids) + (0,) * pad))
    return out


def _pilot_checks(ctx, model) -> tuple[list, np.ndarray]:
    from ...scores.factored import factored_projection_matrix
    from ...scores.forward_sketch import jvp_projection_matrix
    from ...scores.sequence import trainable_parameters
    from ...scores.sketch import torch_projection_matrix
    from ...scores.spec import SketchSpec

    seed = int(ctx.seed_for("C80", 2).generate_state(1)[0])
    params = {name: p.detach() for name, p in trainable_parameters(model).items()}
    dense = SketchSpec(SKETCH_K, seed=SKETCH_SEED, temperature=TEMPERATURE)
    factored = SketchSpec(SKETCH_K, seed=SKETCH_SEED, blocks=SKETCH_BLOCKS,
                          temperature=TEMPERATURE)
    routes = (("auto", None, None),
              ("dense", dense, lambda: torch_projection_matrix(params, dense)),
              ("jvp", dense, lambda: jvp_projection_matrix(model, dense)),
              ("factored", factored, lambda: factored_projection_matrix(model, factored)))
    runs = {route: _pilot(model, seed, spec, route) for route, spec, _ in routes}
    first_seen = runs["auto"][1]
    answers = _padded(first_seen)
    exact = written_scores(model, answers, TEMPERATURE)  # (n, d)
    rewards = np.array([float(sum(ids) % 3 == 0) + 0.25 * len(ids) for _, ids in first_seen])
    prompt_ids = np.repeat(np.arange(len(PROMPTS)), GROUP)
    checks = [check_true("every route's pilot draws the same answers (the route does not touch "
                         "the sampler)", all(seen == first_seen for _, seen in runs.values()),
                         float(len(first_seen)))]
    for route, spec, matrix in routes:
        rollouts = runs[route][0]
        name = "full" if spec is None else route
        target = exact if matrix is None else exact @ matrix().T
        checks.append(check_true(
            f"{name} route: rewards are the reward function's, prompt ids the prompts', and "
            f"the metadata names the route", np.array_equal(rollouts.reward, rewards)
            and np.array_equal(rollouts.prompt_id, prompt_ids)
            and rollouts.sketch_route == name, float(rollouts.reward.size)))
        what = ("per-answer gradients of the written-out log-probability" if spec is None
                else "those gradients x R^T")
        checks.append(check_exact(f"{name} route: scores = {what}", target, rollouts.score,
                                  rtol=RTOL, atol=ATOL, note="float64 rounding"))
    wrong_t = written_scores(model, answers, 1.0)
    other = torch_projection_matrix(params, SketchSpec(SKETCH_K, seed=SKETCH_SEED + 1,
                                                       temperature=TEMPERATURE))
    rejected = [not check_exact("", wrong_t, runs["auto"][0].score, rtol=RTOL, atol=ATOL).passed,
                not check_exact("", exact @ other.T, runs["dense"][0].score, rtol=RTOL,
                                atol=ATOL).passed]
    checks.append(check_true("negative controls: the scores at T = 1 and another seed's "
                             "projection are rejected by the same comparisons", all(rejected),
                             float(sum(rejected))))
    return checks, exact


def _law_checks(ctx, model, exact: np.ndarray) -> list:
    from ...scores.forward_sketch import jvp_projection_matrix
    from ...scores.sequence import trainable_parameters
    from ...scores.sketch import project_scores, projection_matrix, torch_projection_matrix
    from ...scores.spec import SketchSpec

    k = ctx.reps(*LAW_ROWS)
    params = {name: p.detach() for name, p in trainable_parameters(model).items()}
    d = exact.shape[1]
    seeds = ctx.seed_for("C80", 3).generate_state(6)
    checks, rejected = [], []
    truth = np.array([exact[i] @ exact[j] for i, j in LAW_PAIRS])
    makers = (("numpy projection_matrix", lambda spec: projection_matrix(d, spec)),
              ("dense torch_projection_matrix", lambda spec: torch_projection_matrix(params, spec)),
              ("jvp_projection_matrix", lambda spec: jvp_projection_matrix(model, spec)))
    index = 0
    for label, make in makers:
        for kind in ("gaussian", "rademacher"):
            spec = SketchSpec(k, seed=int(seeds[index]), kind=kind)
            index += 1
            R = make(spec)  # (k, d)
            if label.startswith("numpy"):  # project_scores applies this matrix
                checks.append(check_exact(f"project_scores = scores x R^T ({kind})",
                                          exact @ R.T, project_scores(exact, spec), rtol=RTOL,
                                          atol=ATOL))
            proj = exact @ R.T  # (n, k)
            for (i, j), value in zip(LAW_PAIRS, truth):
                reps = k * proj[i] * proj[j]  # (k,) i.i.d. replicates of <W_i, W_j>
                se = reps.std(ddof=1) / math.sqrt(k)
                checks.append(check_close(f"{label} ({kind}, k = {k}): mean of k (r.W_{i})"
                                          f"(r.W_{j}) = <W_{i}, W_{j}>", value, reps.mean(), se,
                                          z=Z_STRICT, note="rows i.i.d.: E[R^T R] = I"))
                if i == j:
                    scaled = 1.25 * reps
                    se_s = scaled.std(ddof=1) / math.sqrt(k)
                    rejected.append(abs(scaled.mean() - value) > Z_STRICT * se_s)
    checks.append(check_true("negative control: rows scaled by sqrt(1.25) (squared norms 25% "
                             "too large) are rejected by the same comparison", all(rejected),
                             float(sum(rejected)), evidence="monte-carlo",
                             note="a power check over every projection, kind and squared norm"))
    return checks


@register("C80", "Beyond the paper: causal_lm_pilot, the route from a user's own causal LM to a "
          "pilot, samples from the model's own law at its temperature, and on every route "
          "(full, dense, jvp, factored with a module only the exact fallback covers) records "
          "the reward function's rewards and scores equal to the written-out gradients times "
          "the route's projection, whose rows satisfy E[R^T R] = I (the inner products of nearly "
          "orthogonal scores checked only to tens of percent: docs/power.md)",
          "derived (docs/theory.md C80; section 7's pilot and projections)",
          "a float64 causal LM with a custom gate: causal_lm_log_prob against log-softmax "
          "summed by position; sample_answers' frequencies against the 73 exact answer "
          "probabilities (chi-square); causal_lm_pilot on four routes against per-answer "
          "autograd gradients times each materialised projection; the projections' inner "
          "products over k i.i.d. rows against the exact ones")
def check_c80(ctx) -> list:
    import torch

    from ...scores.causal_lm import causal_lm_log_prob
    from ...scores.sequence import trainable_parameters

    model = gated_lm()
    params = {name: p.detach() for name, p in trainable_parameters(model).items()}
    prompt = torch.tensor(PROMPTS[0])
    answer, mask = torch.tensor([3, 8, 0]), torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64)
    with torch.no_grad():
        got = float(causal_lm_log_prob(model, prompt, TEMPERATURE)(params, (answer, mask)))
        want = float(written_log_prob(model, PROMPTS[0], (3, 8, 0), (1, 1, 0), TEMPERATURE))
        at_one = float(written_log_prob(model, PROMPTS[0], (3, 8, 0), (1, 1, 0), 1.0))
    checks = [check_exact("causal_lm_log_prob = the answer tokens' log softmax(logits/T) summed "
                          "by position (padding after the end token left out)", want, got,
                          rtol=RTOL, atol=ATOL),
              check_true("negative control: the log-probability at T = 1 is rejected by the "
                         "same comparison", not check_exact("", at_one, got, rtol=RTOL,
                                                            atol=ATOL).passed, at_one)]
    checks += _sampler_checks(ctx, model)
    pilot_checks, exact = _pilot_checks(ctx, model)
    checks += pilot_checks
    checks += _law_checks(ctx, model, exact)
    return checks
