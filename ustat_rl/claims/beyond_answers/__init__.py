"""Beyond the paper: answering routes of the toolkit that no claim ran (docs/theory.md C65-C79
and C81-C84).

* :mod:`.scale_free`: C65, the advice's two targets (the scale-free error and the fixed-budget
  MSE) of two rules against Monte Carlo whose advantages are the rules' formulas written out;
* :mod:`.flat_groups`: C66, the flat-group report: each group's reason on a planted table, and
  the expected share of flat groups at other group sizes against simulated groups;
* :mod:`.ustatistic`: C67, the order-2 U-statistic and its zeta estimates against brute-force
  enumeration and Monte Carlo, and the GRPO kernel's exact zetas against enumeration;
* :mod:`.variance_filter_kit`: C68, the reward-variance filter's conformance kit on the
  definition written out and on two planted wrong filters, and the filter's report from a pilot;
* :mod:`.running_norm`: C69, ROLL's running reward normalisation: its state, its long-run form
  and its loop against the same written out;
* :mod:`.small_answers`: C70, Welch's comparison, the law's best integer ``G``, the budget
  exponent and ``gstar_at`` against scipy, brute force and the pilot's own interval;
* :mod:`.enumerated_routes`: C71, the per-prompt MSE, dynamic sampling's MSE, the per-prompt
  covariance and EBPO's advantages against every outcome of a group, advantages written out;
* :mod:`.filter_reports`: C72, the dynamic-sampling and replace reports' columns against the
  keep probabilities and binomial sums written out and section 7's exact batch routes;
* :mod:`.quadratic_law`: C73, Theorem 8's limit law on a noisy quadratic and its eigenbasis
  form against the Lyapunov equation solved by hand;
* :mod:`.multichannel_kit`: C74, the multi-reward conformance kit, its tolerance, its weights
  check and both kits' probes on functions written here and planted wrong ones;
* :mod:`.sampled_routes`: C75, the bandit's Monte Carlo routes, verl's opo under length models
  and the allocated training step against exact expectations computed without them;
* :mod:`.loglinear_routes`: C76, the log-linear bandit's covariance and batch MSE and the
  moments' restriction and reweighting against its groups enumerated in parameter space;
* :mod:`.user_rules`: C77, a user's own affine rule, registered by name, against every outcome
  of a group;
* :mod:`.aggregation_means`: C78, the exact mean under each loss aggregation against every group
  of outputs;
* :mod:`.answer_boundaries`: C79, the answer objects' small verdicts at their boundaries;
* :mod:`.small_routes`: C81, TRL's group rule, a factored Gram matrix's copy and restriction, a
  rule's function, the loss's factor at ratio 1, a grouped table's rollouts and a transformer
  policy's loop scores against their written-out forms;
* :mod:`.study_routes`: C82, the numpy study routes of batch rules and ReMax's greedy baseline
  against exact moments;
* :mod:`.advice_task_routes`: C83, the advice study's exact held-out reward and its reward on
  token ids against the product and the event written out;
* :mod:`.trl_config_rules`: C84, a TRL run's configuration read as the rule it trains, against
  TRL's arithmetic written out.

Each module registers its claims when imported (:func:`ustat_rl.claims.load_checks`).
"""
