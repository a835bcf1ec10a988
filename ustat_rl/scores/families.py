"""The decoder families people fine-tune with GRPO, built from ``transformers`` configs (no download).

One table, :data:`FAMILIES`, names each family's config and model classes and what sets it apart
(Qwen2's q/k/v biases, Qwen3's per-head q/k norms, Gemma2's ``(1 + w)`` norms and scaled
embeddings, Phi3's fused projections, tied or untied heads). :func:`build_family` makes a model of
any size from it with random weights: tests take laptop sizes, the benchmarks the sizes below.
:data:`QWEN2_5_0_5B` holds the published Qwen2.5-0.5B ``config.json`` values (Hugging Face
``Qwen/Qwen2.5-0.5B``), so the benchmark runs that architecture with random weights.
"""

from __future__ import annotations

from .._validation import as_int

__all__ = ["FAMILIES", "QWEN2_5_0_5B", "QWEN2_100M", "build_family", "family_config"]

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
