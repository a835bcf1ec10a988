"""The factored sketch on the decoder families people train (ustat_rl/scores/coverage.py,
projectors.py, _sketcher.py, families.py; docs/theory.md C31).

Every family of :data:`ustat_rl.scores.families.FAMILIES` (tied and untied heads where the family
has both), PEFT LoRA adapters and gradient checkpointing: the sketched scores equal the full
per-sample autograd scores (an independent route: ``vmap`` of ``grad``) times the materialised
projection, to 1e-10 in float64. Every projector is reached: linear, embedding (Gemma2's scaled one,
and ``padding_idx``), elementwise (every family's RMSNorm spelling, Gemma's ``(1 + w)``), the
general fallback, and an elementwise-looking module whose run-time check sends it to the
fallback. Unbiasedness of projected inner products over seeds is a Monte Carlo check at
``Z_CHECK`` = 4 standard errors (two-sided false-failure rate 6.3e-5 per comparison, 6
comparisons), with the projection at the wrong scale as the negative control.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ustat_rl.scores.causal_lm import Sampling, causal_lm_pilot
from ustat_rl.scores.coverage import fully_sharded, parameter_coverage, uncovered_parameters
from ustat_rl.scores.factored import factored_projection_matrix, factored_sketch_scores
from ustat_rl.scores.forward_sketch import jvp_projection_matrix, jvp_sketch_scores
from ustat_rl.scores.sequence import functional_safe, sequence_log_probs
from ustat_rl.scores.sketch import full_scores
from ustat_rl.scores.spec import SketchSpec
from ustat_rl.tolerances import Z_CHECK

transformers = pytest.importorskip("transformers", reason="the optional extra 'hf'")

from ustat_rl.scores.families import FAMILIES, build_family  # noqa: E402

pytestmark = pytest.mark.fast

#: (family, tied head): both where the family ships both (Qwen2.5 and Qwen3's small models and
#: Llama 3.2 tie theirs, the larger ones do not; Gemma2 ties).
CASES = [("qwen2", False), ("qwen2", True), ("qwen3", False), ("qwen3", True),
         ("llama", False), ("llama", True), ("mistral", False), ("gemma2", True),
         ("gemma2", False), ("phi3", False)]


def _batch(vocab=13):
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(3, vocab, (5, 7), generator=gen)
    tokens[1, 2] = tokens[3, 4] = 0  # the pad id inside answers: its row gets no gradient
    mask = torch.zeros(5, 7, dtype=torch.float64)
    mask[:, 3:] = 1.0
    mask[0, 5:] = 0.0  # padding after an end token
    return tokens, mask


def _model(name, tied, **values):
    model = build_family(name, seed=3, dtype=torch.float64, tie_word_embeddings=tied, **values)
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(4)
        for p in model.parameters():
            if p.ndim == 1:  # norms start at 1 (or 0 in Gemma): move them off the identity
                p.add_(0.3 * torch.randn_like(p))
    return model


def _full(model, tokens, mask):
    params = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}

    def log_prob(p, sample):
        return sequence_log_probs(model, sample[0][None], sample[1][None], params=p)[0]

    was_training = model.training
    model.eval()
    try:
        with functional_safe(model):
            return full_scores(log_prob, params, (tokens, mask))
    finally:
        model.train(was_training)


def _assert_exact(model, tokens, mask, reference, k=12, blocks=3):
    sketch = factored_sketch_scores(model, tokens, mask, SketchSpec(k, 3, blocks=blocks)).numpy()
    projected = reference @ factored_projection_matrix(model, SketchSpec(k, 3, blocks=blocks)).T
    assert np.allclose(sketch, projected, rtol=1e-10, atol=1e-10 * np.abs(projected).max())


@pytest.mark.parametrize("name,tied", CASES)
def test_every_family_is_covered_by_fast_projectors_and_sketched_exactly(name, tied):
    model = _model(name, tied)
    coverage = parameter_coverage(model)
    assert uncovered_parameters(model) == []
    norms = [n for n in coverage if "norm" in n]
    assert norms and all(coverage[n] == "elementwise" for n in norms)
    head = "embedding+linear" if tied else "embedding"
    assert [r for n, r in coverage.items() if "embed" in n] == [head]
    tokens, mask = _batch()
    model.train()  # dropout on: the sketch turns it off and restores the mode
    _assert_exact(model, tokens, mask, _full(model, tokens, mask))
    assert model.training


@pytest.mark.parametrize("name,broken", [("llama", "padding_idx"), ("gemma2", "scale")])
def test_padding_rows_and_the_embedding_scale_are_what_autograd_gives(name, broken,
                                                                       monkeypatch):
    """Negative controls of the same comparison: the embedding projector without the padding mask,
    and Gemma2's embedding without its scale (``sqrt(width)``), differ from autograd."""
    from ustat_rl.scores.projectors import Embedding

    tokens, mask = _batch()
    model = _model(name, False)
    reference = _full(model, tokens, mask)
    _assert_exact(model, tokens, mask, reference)
    original = Embedding.gradient

    def without(sk, module, spec, ids, scale, grad):
        if broken == "scale":
            return original(sk, module, spec, ids, None, grad)
        saved, module.padding_idx = module.padding_idx, None
        try:
            return original(sk, module, spec, ids, scale, grad)
        finally:
            module.padding_idx = saved

    monkeypatch.setattr(Embedding, "gradient", staticmethod(without))
    with pytest.raises(AssertionError):
        _assert_exact(model, tokens, mask, reference)


@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_lora_adapters_are_sketched_with_respect_to_the_adapter_alone(name):
    peft = pytest.importorskip("peft", reason="the optional extra 'trl'")
    model = peft.get_peft_model(_model(name, False), peft.LoraConfig(
        r=2, lora_alpha=4, lora_dropout=0.1, target_modules=["q_proj", "v_proj", "down_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:  # zero at initialisation: every score would be degenerate
                p.normal_()
    coverage = parameter_coverage(model)
    assert coverage and all("lora_" in n and r == "linear" for n, r in coverage.items())
    tokens, mask = _batch()
    model.train()
    _assert_exact(model, tokens, mask, _full(model, tokens, mask))


@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_leaves_the_scores_exact(lora):
    """Checkpointing installs a hook that marks the frozen embeddings' output as requiring
    grad; the sketch still finds where the backward pass starts."""
    model = _model("qwen2", True)
    if lora:
        peft = pytest.importorskip("peft", reason="the optional extra 'trl'")
        model = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"]))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_()
    tokens, mask = _batch()
    reference = _full(model, tokens, mask)
    model.gradient_checkpointing_enable()
    model.train()
    _assert_exact(model, tokens, mask, reference)
    with_checkpointing = _full(model, tokens, mask)  # the full route lifts the hook for vmap
    assert np.allclose(with_checkpointing, reference, rtol=1e-12, atol=1e-12)


class _Mix(torch.nn.Module):
    """A matrix used non-linearly: no fast projector, the fallback."""

    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width, width) / width)

    def forward(self, x):
        return x @ torch.tanh(self.weight)


class _Cumulative(torch.nn.Module):
    """A 1-D parameter of the output's width whose Jacobian is not diagonal: it looks
    elementwise, the run-time check sends it to the fallback."""

    def __init__(self, width):
        super().__init__()
        self.shift = torch.nn.Parameter(torch.randn(width))

    def forward(self, x):
        return x + torch.cumsum(self.shift, 0)


class _Doubled(torch.nn.Linear):
    """A linear layer whose ``forward`` is not ``nn.Linear``'s: the fallback, not the linear projector."""

    def forward(self, x):
        return 2.0 * torch.nn.functional.linear(x, self.weight, self.bias)


class _Odd(torch.nn.Module):
    def __init__(self, vocab=13, width=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width, padding_idx=0)
        self.norm = torch.nn.LayerNorm(width)
        self.shift = _Cumulative(width)
        self.mix = _Mix(width)
        self.head = _Doubled(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        x = self.mix(self.shift(self.norm(x)))
        return self.head(torch.tanh(x.cumsum(dim=1)))


def test_the_fallback_is_exact_and_listed():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = _Odd().double()
    coverage = parameter_coverage(model)
    assert coverage["shift.shift"] == "elementwise" and coverage["norm.weight"] == "elementwise"
    assert uncovered_parameters(model) == ["mix.weight", "head.weight", "head.bias"]
    tokens, mask = _batch()
    _assert_exact(model, tokens, mask, _full(model, tokens, mask))


class _Flipped(torch.nn.Embedding):
    def forward(self, ids):
        return super().forward(ids).flip(-1)


class _Pair(torch.nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * self.weight, x


class _Wrapped(torch.nn.Module):
    def __init__(self, inner, vocab=13, width=4, checkpoint=None):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.inner, self.checkpoint = inner, checkpoint
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.checkpoint is None:
            x = self.inner(x)
        else:
            x = torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=self.checkpoint)
        x = x[0] if isinstance(x, tuple) else x
        return self.head(torch.tanh(x.cumsum(dim=1)))


def test_what_cannot_be_sketched_is_refused_in_one_line():
    tokens, mask = _batch()
    model = _Wrapped(torch.nn.Identity()).double()
    model.embed = _Flipped(13, 4).double()
    with pytest.raises(ValueError, match="not a scaled row gather"):
        factored_sketch_scores(model, tokens, mask, SketchSpec(4, 0, blocks=1))
    with pytest.raises(ValueError, match="returns tuple, not a tensor"):
        factored_sketch_scores(_Wrapped(_Pair()).double(), tokens, mask, SketchSpec(4, 0, blocks=1))
    with pytest.raises(ValueError, match="gradients off"):  # reentrant checkpointing
        factored_sketch_scores(_Wrapped(torch.nn.LayerNorm(4), checkpoint=True).double(),
                               tokens, mask, SketchSpec(4, 0, blocks=1))

    class FlatParameter(torch.nn.Parameter):  # the class name FSDP's flat parameters carry
        pass

    sharded = _Wrapped(torch.nn.Identity()).double()
    sharded.head.bias = FlatParameter(sharded.head.bias.detach())
    with pytest.raises(ValueError, match="sharded"):
        factored_sketch_scores(sharded, tokens, mask, SketchSpec(4, 0, blocks=1))

    # DeepSpeed ZeRO-3 leaves each partitioned parameter empty outside its gather and marks it
    # with ``ds_id``: refused in one line where no DeepSpeed hook gathers it (its module not
    # marked ``ds_id`` by deepspeed.initialize), while the same model unmarked is sketched
    # (the sketch under a real ZeRO-3 engine: tests/scores/test_factored_zero3.py)
    zero3 = _Wrapped(torch.nn.Identity()).double()
    assert factored_sketch_scores(zero3, tokens, mask, SketchSpec(4, 0, blocks=1)).shape[1] == 4
    zero3.head.bias.ds_id = 7
    with pytest.raises(ValueError, match="partitioned by DeepSpeed ZeRO-3 but no DeepSpeed hook "
                                         "gathers it; .*deepspeed.initialize"):
        factored_sketch_scores(zero3, tokens, mask, SketchSpec(4, 0, blocks=1))


def test_zero3_marks_change_nothing_where_the_tensors_are_whole():
    """The parts of the ZeRO-3 route that run without DeepSpeed (tested under a real ZeRO-3
    engine in tests/scores/test_factored_zero3.py): every module and parameter marked as
    ``deepspeed.initialize`` marks them (``ds_id``, ``ds_shape``), the tensors left whole. The
    sketch is the unmarked model's (rtol 1e-12), the shapes are read from ``ds_shape``, and the
    projectors run a marked module again without its hooks (DeepSpeed's would gather the swapped
    tensors): each hook below runs once, in the model's own forward. Control: unmarked, the
    same hooks also run in the projectors' calls (measured: more than once)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = _Odd().double()
    tokens, mask = _batch()
    reference = factored_sketch_scores(model, tokens, mask, SketchSpec(12, 3, blocks=3)).numpy()
    calls = {}

    def count(module, args, output):
        calls[type(module).__name__] = calls.get(type(module).__name__, 0) + 1

    for module in (model.norm, model.shift, model.mix):
        module.register_forward_hook(count)
    factored_sketch_scores(model, tokens, mask, SketchSpec(12, 3, blocks=3))
    unmarked = dict(calls)
    assert unmarked["LayerNorm"] > 1 and unmarked["_Mix"] > 1  # the projectors' own calls
    for number, module in enumerate(model.modules()):
        module.ds_id = number
    for number, p in enumerate(model.parameters()):
        p.ds_id, p.ds_shape = number, p.shape
    assert fully_sharded(model)  # every forward would all-gather: windows of equal passes only
    calls.clear()
    marked = factored_sketch_scores(model, tokens, mask, SketchSpec(12, 3, blocks=3)).numpy()
    assert calls == {"LayerNorm": 1, "_Cumulative": 1, "_Mix": 1}
    assert np.allclose(marked, reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())
    # outside DeepSpeed's gather each tensor is empty: the factors follow ds_shape and so
    # does coverage (an empty tensor is 1-D)
    matrix = factored_projection_matrix(model, SketchSpec(12, 3, blocks=3))
    coverage = parameter_coverage(model)
    for p in model.parameters():
        p.data = torch.empty(0, dtype=p.dtype)
    assert np.array_equal(factored_projection_matrix(model, SketchSpec(12, 3, blocks=3)), matrix)
    assert parameter_coverage(model) == coverage
    plain = _Wrapped(torch.nn.LayerNorm(4)).double()  # nn.Linear and nn.LayerNorm's own projectors
    coverage = parameter_coverage(plain)
    for p in plain.parameters():
        p.ds_id, p.ds_shape, p.data = 0, p.shape, torch.empty(0, dtype=p.dtype)
    assert parameter_coverage(plain) == coverage


def test_non_reentrant_checkpointing_in_eval_mode_is_exact():
    """The checkpointed module runs again in the backward pass; its hooks must not count it."""
    tokens, mask = _batch()
    with torch.random.fork_rng():
        torch.manual_seed(2)
        model = _Wrapped(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)),
                         checkpoint=None).double()
    reference = _full(model, tokens, mask)  # vmap refuses checkpointing's saved-tensor hooks
    model.checkpoint = False
    _assert_exact(model, tokens, mask, reference)


def test_jvp_route_runs_under_every_familys_attention():
    """The jvp route under sdpa attention (no forward-mode derivative in the fused kernels)
    equals the full scores times its matrix. These families' RMSNorm computes in float32
    whatever the model's precision, so forward and reverse mode round differently there: they
    agree to 1e-5 of the scale (float32 rounding through a few layers), where the matrix of
    another seed is off by O(1)."""
    tokens, mask = _batch()
    for name in ("qwen2", "llama"):
        model = _model(name, False)
        assert model.config._attn_implementation == "sdpa"
        sketch = jvp_sketch_scores(model, tokens, mask, SketchSpec(3, 1)).numpy()
        full = _full(model, tokens, mask)
        projected = full @ jvp_projection_matrix(model, SketchSpec(3, 1)).T
        tol = 1e-5 * np.abs(projected).max()
        assert np.allclose(sketch, projected, rtol=0, atol=tol)
        assert not np.allclose(sketch, full @ jvp_projection_matrix(model,
                                                                    SketchSpec(3, 2)).T, atol=tol)


#: Pairs (i, j) of samples whose projected inner products are compared; (i, i) is a squared norm.
PAIRS = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2))


def test_projected_inner_products_are_unbiased_on_a_tied_qwen2():
    """Over 400 seeds (k = 8 in 2 blocks), ``<R W_i, R W_j>`` averages to the exact
    ``<W_i, W_j>`` of the tied Qwen2's full scores within 4 se for each of 6 pairs; the sketch
    times ``sqrt(2)`` (a wrong scale) is rejected on the 3 squared norms."""
    model = _model("qwen2", True)
    tokens, mask = _batch()
    tokens, mask = tokens[:3], mask[:3]
    full = _full(model, tokens, mask)
    exact = np.array([full[i] @ full[j] for i, j in PAIRS])
    values = []
    for seed in range(400):
        s = factored_sketch_scores(model, tokens, mask, SketchSpec(8, seed, blocks=2)).numpy()
        values.append([s[i] @ s[j] for i, j in PAIRS])
    values = np.array(values)

    def z(v, e):
        return (v.mean(axis=0) - e) / (v.std(axis=0, ddof=1) / np.sqrt(len(v)))

    assert np.all(np.abs(z(values, exact)) <= Z_CHECK)
    assert np.all(np.abs(z(2.0 * values[:, :3], exact[:3])) > Z_CHECK)


@pytest.mark.parametrize("name", ["qwen2", "llama"])
def test_pilot_on_a_family_picks_the_factored_route(name):
    model = _model(name, False)
    prompts = [[1, 5, 6], [1, 7]]
    kwargs = dict(prompts=prompts, reward_fn=lambda i, a: float(len(a) % 2),
                  sampling=Sampling(3, 3, seed=2, eos_token_id=2))
    out = causal_lm_pilot(model, sketch=SketchSpec(8, 1, blocks=2), **kwargs)
    full = causal_lm_pilot(model, **kwargs)
    assert out.sketch_route == "factored" and out.score.shape == (6, 8)
    R = factored_projection_matrix(model, SketchSpec(8, out.sketch_seed, blocks=2))
    assert np.allclose(out.score, full.score @ R.T, rtol=1e-9, atol=1e-9 * np.abs(out.score).max())
    model.gradient_checkpointing_enable()
    dense = causal_lm_pilot(model, sketch=SketchSpec(4, 1), route="dense", **kwargs)
    assert dense.sketch_route == "dense" and np.all(np.isfinite(dense.score))


def test_bf16_weights_and_autocast_give_the_scores_to_bf16_rounding():
    """bf16 weights (projections in float32) and a bf16 autocast around a float32 model: each
    within 5% of the float64 scores' scale (bf16 keeps 8 bits; a wrong projector is off by O(1))."""
    model = _model("qwen2", True)
    tokens, mask = _batch()
    exact = factored_sketch_scores(model, tokens, mask, SketchSpec(8, 0, blocks=2)).numpy()
    scale = np.abs(exact).max()
    half = factored_sketch_scores(model.to(torch.bfloat16), tokens, mask,
                                  SketchSpec(8, 0, blocks=2, dtype=torch.float32)).numpy()
    assert np.abs(half - exact).max() <= 0.05 * scale
    model.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = factored_sketch_scores(model, tokens, mask, SketchSpec(8, 0, blocks=2)).numpy()
    assert np.abs(mixed - exact).max() <= 0.05 * scale
    assert np.abs(mixed - exact).max() > 0  # autocast really ran the forward in bf16


def test_families_table_builds_every_family():
    assert set(name for name, _ in CASES) == set(FAMILIES)
    with pytest.raises(ValueError, match="`name`"):
        build_family("gpt5")


@pytest.mark.parametrize("lora", [False, True])
def test_the_backward_pass_starts_at_the_first_trainable_modules_only(lora, monkeypatch):
    """Where no hooked output lies upstream, a module's output gradient is taken explicitly; for
    every other module a tensor hook receives it. Full fine-tuning starts at the embedding alone;
    a LoRA adapter under gradient checkpointing (whose frozen embeddings' output is marked as
    requiring grad) at the first layer's two adapters, not at every adapter."""
    from ustat_rl.scores._sketcher import Sketcher

    model = _model("qwen2", False)
    if lora:
        peft = pytest.importorskip("peft", reason="the optional extra 'trl'")
        model = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj",
                                                                                  "v_proj"]))
        model.gradient_checkpointing_enable()
    seen = {}
    original = Sketcher._hook

    def spy(self, *args):
        out = original(self, *args)
        seen["roots"] = len(self.roots)
        return out

    monkeypatch.setattr(Sketcher, "_hook", spy)
    tokens, mask = _batch()
    factored_sketch_scores(model, tokens, mask, SketchSpec(4, 0, blocks=1))
    assert seen["roots"] == (2 if lora else 1)
