"""A GRPO run small enough for a laptop CPU: the monitor's test bed, notebook and benchmark.

A GPT-2 built from a config (no download), a character tokenizer built here, the prompts
``"a+b="`` for digits ``a, b`` and a toy arithmetic reward: 1 when the answer's first character
is a digit with the parity of ``a + b``, else 0 (an untrained model earns it about a third of
the time, so groups of a few answers are often but not always all equal). Needs the ``trl``
extra.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validation import as_int

__all__ = ["char_tokenizer", "tiny_gpt2", "tiny_family", "parity_reward", "arithmetic_prompts",
           "demo_trainer", "DemoSetup", "VOCAB", "DEMO_LEARNING_RATE"]

#: Token ids of the character tokenizer: padding, end of sequence, digits, ``+`` and ``=``.
VOCAB = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate("0123456789+=")}}

#: The demo trainer's learning rate unless ``learning_rate=`` is passed (a GRPOConfig field).
DEMO_LEARNING_RATE = 1e-3


def char_tokenizer():
    """A ``PreTrainedTokenizerFast`` with one token per character of :data:`VOCAB`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    # the inputs a causal LM's tokenizer returns (transformers < 5 adds token_type_ids by
    # default, which older TRL passes to generate: GPT-2 would add a type embedding when
    # sampling, and Qwen2 or Llama refuse the argument)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   model_input_names=["input_ids", "attention_mask"])


def tiny_gpt2(seed: int = 0, n_embd: int = 16, n_layer: int = 2, n_head: int = 2):
    """A randomly initialised ``GPT2LMHeadModel`` over :data:`VOCAB` (seeded)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(as_int(seed, "seed", 0))
    config = GPT2Config(vocab_size=len(VOCAB), n_positions=32, n_embd=n_embd, n_layer=n_layer,
                        n_head=n_head, bos_token_id=1, eos_token_id=1, pad_token_id=0)
    return GPT2LMHeadModel(config)


def tiny_family(name: str, seed: int = 0, **values):
    """A randomly initialised model of a decoder family of
    :data:`ustat_rl.scores.families.FAMILIES` (Qwen2, Llama, ...) over :data:`VOCAB`, width 16
    and 2 layers unless ``values`` say otherwise (seeded; float32)."""
    from ..scores.families import build_family

    settings = dict(vocab_size=len(VOCAB), pad_token_id=0, bos_token_id=1, eos_token_id=1,
                    max_position_embeddings=32)
    return build_family(name, seed=seed, **{**settings, **values})


def parity_reward(completions, prompts, **kwargs) -> list[float]:
    """TRL reward function: 1.0 when the completion starts with a digit of the parity of
    ``a + b`` for the prompt ``"a+b="``, else 0.0."""
    out = []
    for prompt, completion in zip(prompts, completions):
        a, b = prompt[:-1].split("+")
        first = completion[:1]
        out.append(1.0 if first.isdigit() and int(first) % 2 == (int(a) + int(b)) % 2 else 0.0)
    return out


def arithmetic_prompts() -> list[str]:
    """The 100 prompts ``"a+b="``, ``a, b`` in ``0..9``."""
    return [f"{a}+{b}=" for a in range(10) for b in range(10)]


@dataclass(frozen=True)
class DemoSetup:
    """What a demo run is built from besides its sizes, model and reward (:func:`demo_trainer`).

    Attributes
    ----------
    prompts : sequence of str, optional
        The training set's prompt column (default :func:`arithmetic_prompts`, the 100 prompts
        once each; TRL draws a step's prompts from it without replacement, epoch by epoch, so a
        set of rows drawn i.i.d. makes the steps' prompts i.i.d.).
    trainer_class : type, optional
        Replaces ``trl.GRPOTrainer`` (a subclass, say).
    peft_config : peft.LoraConfig, optional
        Trains an adapter, as ``GRPOTrainer`` takes it.
    """

    prompts: tuple | None = None
    trainer_class: type | None = None
    peft_config: object = None

    def __post_init__(self):
        if self.prompts is not None:
            prompts = tuple(str(p) for p in self.prompts)
            if not prompts:
                raise ValueError("`prompts` must hold at least one prompt")
            object.__setattr__(self, "prompts", prompts)


def demo_trainer(output_dir, group_size: int = 4, groups: int = 8, steps: int = 4, *,
                 model=None, reward=parity_reward, setup: DemoSetup | None = None, **config):
    """A ``trl.GRPOTrainer`` on the CPU: ``groups`` prompts of ``group_size`` answers per step,
    answers of at most 3 tokens, logging every step into ``state.log_history`` (not printed),
    no reports or checkpoints.

    ``model`` (default :func:`tiny_gpt2`) and ``reward`` (one reward function or a list) are
    the trainer's own first two arguments; ``setup`` (:class:`DemoSetup`) sets the prompts,
    the trainer's class and a PEFT adapter; extra keywords go to ``trl.GRPOConfig`` and
    override the demo's own settings (``learning_rate`` 1e-3 among them).
    """
    import datasets
    import trl

    group_size = as_int(group_size, "group_size", 2)
    groups = as_int(groups, "groups", 1)
    setup = DemoSetup() if setup is None else setup
    if not isinstance(setup, DemoSetup):
        raise TypeError(f"`setup` must be a DemoSetup, got {type(setup).__name__}")
    rows = arithmetic_prompts() if setup.prompts is None else list(setup.prompts)
    data = datasets.Dataset.from_dict({"prompt": rows})
    options = dict(output_dir=str(output_dir), per_device_train_batch_size=group_size * groups,
                   num_generations=group_size, max_completion_length=3,
                   max_steps=as_int(steps, "steps", 1), logging_steps=1, report_to=[],
                   use_cpu=True, learning_rate=DEMO_LEARNING_RATE, save_strategy="no", seed=0,
                   disable_tqdm=True)
    args = trl.GRPOConfig(**{**options, **config})
    trainer = (setup.trainer_class or trl.GRPOTrainer)(
        model=model if model is not None else tiny_gpt2(), reward_funcs=reward, args=args,
        train_dataset=data, processing_class=char_tokenizer(), peft_config=setup.peft_config)
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # quiet: the logs stay in state.log_history
    return trainer
