"""SkyRL's MaxRL advantage (``trainer.algorithm.advantage_estimator=maxrl``), as test data.

Extracted for tests/advantages/test_beyond_group_rules.py, which runs the conformance kit on
SkyRL's own arithmetic. Source: NovaSky-AI/SkyRL at commit
a9564572eb8e91076be43c1bd5e4615e3de17265 (2026-08-21),
skyrl/backends/skyrl_train/utils/ppo_utils.py lines 1396-1428 (compute_maxrl_advantage) and its
imports (lines 19, 24 and 26). Apache License 2.0 (http://www.apache.org/licenses/LICENSE-2.0).

The function is unchanged but for its decorator ``@register_advantage_estimator(...)`` (line
1396), which only adds it to SkyRL's registry. It takes verl's signature
``(token_level_rewards (n, T), response_mask (n, T), index (n,))``. Nothing in ustat_rl
imports this file.
"""
# ruff: noqa

from collections import defaultdict

import numpy as np
import torch


def compute_maxrl_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compute advantage for MAXRL using mean-normalized group-relative rewards."""
    scores = token_level_rewards.sum(dim=-1)

    id2score = defaultdict(list)
    id2mean = {}

    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if len(id2score[index[i]]) > 1:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2mean[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask

    return scores, scores
