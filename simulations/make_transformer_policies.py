"""Make the three transformer policies of the Fig. 4 / Fig. 5 analogues (docs/theory.md C11, C18).

One tiny causal transformer (about 1e5 parameters) is warmed up by maximum likelihood on the
training split of the arithmetic task; snapshots after increasing numbers of steps are the
analogues of the paper's three policies of increasing strength:

=========  ========================================  ==================
name       paper analogue                            warm-up steps
=========  ========================================  ==================
weak       Qwen2.5-0.5B base                         400
medium     Qwen2.5-0.5B instruct                     1200
strong     Qwen2.5-0.5B instruct, five-shot prompt   3000
=========  ========================================  ==================

Weights are saved in float32 (about 0.4 MB each) under ``ustat_rl/data/transformer_policies``
together with their exact expected test accuracy. Run (about 2 minutes on one CPU core)::

    python simulations/make_transformer_policies.py
    python simulations/make_transformer_policies.py --quick   # 10/20/30 steps, seconds

``--quick`` is a smoke test of the pipeline: its snapshots go to
``results/quick/make_transformer_policies`` and never replace the committed policies.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ustat_rl.policies.transformer import (
    ArithmeticTask,
    make_splits,
    new_policy,
    resolve_device,
    save_policy,
)
from ustat_rl.runs.script_args import check_script_args, seed_type
from ustat_rl.runs.script_config import add_config_arguments, option, resolve_quick
from ustat_rl.training.transformer import expected_accuracy, supervised_warmup

STAGES = (("weak", 400), ("medium", 1200), ("strong", 3000))
QUICK_STAGES = (("weak", 10), ("medium", 20), ("strong", 30))
OUT = Path(__file__).resolve().parents[1] / "ustat_rl" / "data" / "transformer_policies"
QUICK_OUT = Path("results", "quick", "make_transformer_policies")


@dataclass(frozen=True)
class Config:
    """The seeds of the study policies (the warm-up stages are ``STAGES``/``QUICK_STAGES``)."""

    seed: int = option(0, flag="--seed", type=seed_type,
                       help="model initialisation and minibatch seed (an integer >= 0)")
    split_seed: int = option(0, flag="--split-seed", type=seed_type,
                             help="seed of the train/test split (an integer >= 0)")


def build_parser() -> argparse.ArgumentParser:
    """The script's options; the ones that set :class:`Config` come from its fields."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{'/'.join(str(s) for _, s in QUICK_STAGES)} warm-up steps into "
                             f"{QUICK_OUT} (seconds; a smoke test)")
    add_config_arguments(parser, Config)
    parser.add_argument("--out", type=Path, default=None,
                        help=f"directory for the .pt files (default the package's {OUT.name}; "
                             f"with --quick {QUICK_OUT})")
    parser.add_argument("--device", default=None, help="torch device (default: CUDA if available)")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = resolve_quick(parser.parse_args(argv), Config)
    args.out = args.out or (QUICK_OUT if args.quick else OUT)
    check_script_args(parser, args)
    args.out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(args.device)
    task = ArithmeticTask()
    splits = make_splits(task, seed=args.split_seed)
    policy = new_policy(task, args.seed, device=device)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    done, start = 0, time.perf_counter()
    for name, steps in QUICK_STAGES if args.quick else STAGES:
        losses = supervised_warmup(policy, splits.train, steps - done, gen)
        done = steps
        acc = expected_accuracy(policy, splits.test)
        save_policy(policy, args.out / f"{name}.pt", name=name, warmup_steps=steps,
                    test_accuracy=acc, final_loss=float(losses[-100:].mean()),
                    seed=args.seed, split_seed=args.split_seed, n_params=policy.dim)
        print(f"{name}: {steps} steps, expected test accuracy {acc:.3f}, "
              f"{time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
