"""Per-sample scores of a model, full or sketched, and the pilots that record them (section 7).

A model (a causal language model, the synthetic transformer, a softmax bandit) becomes per-sample
scores ``W = grad log pi`` or their random projections ``R W``: the dense reference
(:mod:`.sketch`), the factored sketch taken by module hooks in one backward pass
(:mod:`.factored`, :mod:`.coverage`), the forward-mode one (:mod:`.forward_sketch`), and the
pilots that record rewards and scores as :class:`~ustat_rl.pilot.Rollouts` (:mod:`.causal_lm`,
:mod:`.transformer`, :mod:`.bandit`). This package needs ``torch``; the statistics on the result
(:mod:`ustat_rl.pilot`) do not.
"""
