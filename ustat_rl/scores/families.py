"""The decoder families people fine-tune with GRPO, built from ``transformers`` configs (no download).

One table, :data:`FAMILIES`, names each family's config and model classes and what sets it apart
(Qwen2's q/k/v biases, Qwen3's per-head q/k norms, Gemma2's ``(1 + w)`` norms and scaled
embeddings, Phi3's fused projections, tied or untied heads). :func:`build_family` makes a model of
any size from it with random weights: tests take laptop sizes, the benchmarks the sizes below.
:data:`QWEN2_5_0_5B` holds the published Qwen2.5-0.5B ``config.json`` values (Hugging Face
``Qwen/Qwen2.5-0.5B``), so the benchmark runs that architecture with random weights.
:func:`tiny_causal_lm` is a causal LM of 154 parameters in plain torch, with every kind
of parameter the sketch covers but GPT-2's Conv1D (and optionally Gemma's scaled embedding).
"""

from __future__ import annotations

from .._validation import as_int

__all__ = ["FAMILIES", "QWEN2_5_0_5B", "QWEN2_100M", "build_family", "family_config",
           "tiny_causal_lm"]

#: ``name: (config class, model class, extra config values, tied head by default)``.
FAMILIES = {
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}, False),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 8}, False),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}, False),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}, False),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 8}, True),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}, False),
}

#: Qwen/Qwen2.5-0.5B's published ``config.json`` (architecture only; 494M parameters).
QWEN2_5_0_5B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                    num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                    max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                    tie_word_embeddings=True, hidden_act="silu", bos_token_id=151643,
                    eos_token_id=151643, sliding_window=32768, max_window_layers=24,
                    use_sliding_window=False, attention_dropout=0.0)

#: A Qwen2-architecture model of about 100M parameters (Qwen2.5's vocabulary, tied head, width
#: 512, 8 layers of 8 query and 2 key-value heads): 108.2M parameters.
QWEN2_100M = dict(QWEN2_5_0_5B, hidden_size=512, intermediate_size=2048, num_hidden_layers=8,
                  num_attention_heads=8, num_key_value_heads=2)


def family_config(name: str, **values):
    """The ``transformers`` config of family ``name`` at a laptop size, overridden by ``values``
    (vocabulary 13, width 16, 2 layers, 2 query heads and 1 key-value head, pad id 0)."""
    import transformers

    if name not in FAMILIES:
        raise ValueError(f"`name` must be one of {sorted(FAMILIES)}, got {name!r}")
    config_class, _, extra, tied = FAMILIES[name]
    settings = dict(vocab_size=13, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                    pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=tied)
    settings.update(extra)
    settings.update(values)
    return getattr(transformers, config_class)(**settings)


def build_family(name: str, seed: int = 0, dtype=None, **values):
    """A model of family ``name`` with random weights drawn under ``seed`` (the global torch
    stream is left as it was), in ``dtype`` (default float32); ``values`` override the config.

    Examples
    --------
    >>> model = build_family("qwen2", tie_word_embeddings=True)
    >>> type(model).__name__, model.lm_head.weight is model.model.embed_tokens.weight
    ('Qwen2ForCausalLM', True)
    """
    import torch
    import transformers

    seed = as_int(seed, "seed", 0)
    config = family_config(name, **values)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = getattr(transformers, FAMILIES[name][1])(config)
    return model if dtype is None else model.to(dtype)


def tiny_causal_lm(embed_scale: float | None = None):
    """A causal LM over 9 tokens with an embedding, a layer norm, a linear layer with bias and a
    head with bias: every covered kind of parameter but GPT-2's Conv1D (float32, torch's default
    initialisation from the global stream).

    With ``embed_scale`` the embedding is a subclass of ``nn.Embedding`` whose ``forward``
    multiplies the gathered rows by that constant (a buffer cast to the table's dtype), as
    Gemma's scaled word embedding does: the sketch must read the scale off the module at run time.
    """
    import torch

    class ScaledEmbedding(torch.nn.Embedding):
        def __init__(self, vocab, width, scale):
            super().__init__(vocab, width)
            self.register_buffer("embed_scale", torch.tensor(scale), persistent=False)

        def forward(self, ids):
            return super().forward(ids) * self.embed_scale.to(self.weight.dtype)

    class TinyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = (torch.nn.Embedding(9, 5) if embed_scale is None
                          else ScaledEmbedding(9, 5, embed_scale))
            self.norm = torch.nn.LayerNorm(5)
            self.mix = torch.nn.Linear(5, 6)
            self.head = torch.nn.Linear(6, 9)

        def forward(self, tokens):
            h = self.norm(self.embed(tokens)).cumsum(dim=1)  # causal: t sees tokens <= t
            return self.head(torch.tanh(self.mix(h)))

    return TinyLM()
