"""Why a public route that no claim of ``ustat-rl verify --quick`` executes may stay so.

The route map (``benchmarks/route_map.py``) lists, for every public function and method of
``ustat_rl``, the claims that execute it. A route executed by none is a route verify does not
vouch for. It may stay so only with an entry here: the route's dotted name, or a module's or a
class's (then every route under it), with a one-line reason whose kind, the words before its
first colon, is one of :data:`KINDS`:

- ``printing``, ``I/O``, ``plotting``, ``argument parsing``: the route computes no answer of its
  own; it shows, reads, writes or parses (and refuses) what answering routes compute;
- ``accessor``: a property or method that hands back a stored setting or record unchanged;
- ``construction``: builds a model, tokenizer, task or trainer for a demo or a test, no answer;
- ``verify runner``: the machinery of verify itself (registering, comparing, rendering claims),
  run around the claims rather than inside one;
- ``script infrastructure``: runs the simulation scripts' cells and writes their records;
- ``declaration``: a protocol's or abstract method without a body (the route map gives these
  their reason itself);
- ``no claim yet``: the route computes an answer a user can get (a number, a verdict, advice, a
  conformance result) and no claim runs it. These are the to-do list of issue 48, item 2,
  listed in docs/claims.md; each leaves this file when a claim executes it, and
  ``tests/scripts/test_route_map.py`` fails while an exact entry here names a claimed route.

An entry for a module covers routes a claim does execute, too; only the routes executed by no
claim read their reason from it.
"""

#: The reason of every answering route that no claim executes yet.
UNCLAIMED = "no claim yet: issue 48 item 2"

KINDS = ("printing", "I/O", "plotting", "argument parsing", "accessor", "construction",
         "verify runner", "script infrastructure", "declaration", "no claim yet")


def reason_kind(reason: str) -> str:
    """The kind of a reason: its words before the first colon."""
    return reason.split(":", 1)[0].strip()


ALLOW = {
    # ---- printing
    "ustat_rl.advantages.frameworks.KitWords":
        "printing: a convention in the conformance kit's words",
    "ustat_rl.advantages.rule.AdvantageRule.baseline":
        "printing: the rule's numerator in the kit's words",
    "ustat_rl.advantages.rule.AdvantageRule.singleton_numerator":
        "printing: the one-sample case in words",
    "ustat_rl.advantages.rule.AdvantageRule.singleton_divisor":
        "printing: the one-sample case in words",
    "ustat_rl.conformance.report.ConformanceReport.summary": "printing: the report as text",
    "ustat_rl.frameworks.logs_report.format_logs_report": "printing: a LogsReport as text",
    "ustat_rl.frameworks.rewards_only.format_rewards_report": "printing: a RewardsReport as text",
    "ustat_rl.frameworks.trl_monitor.GroupSizeMonitor.estimator_source":
        "printing: where the rule was read, in words",
    "ustat_rl.interface.dynamic_sampling.format_dynamic_sampling":
        "printing: the command's section as text",
    "ustat_rl.interface.dynamic_sampling.format_replace_sampling":
        "printing: the command's section as text",
    "ustat_rl.interface.report.environment": "printing: package versions and the machine",
    "ustat_rl.interface.report.render_report": "printing: verify's HTML report",
    "ustat_rl.policies.transformer.task.CharTokenizer.decode": "printing: token ids as characters",
    # ---- I/O
    "ustat_rl.frameworks.advice_task.WarmStart.key": "I/O: the cache file's name",
    "ustat_rl.frameworks.dumps.detect_format": "I/O: a log's format from its path",
    "ustat_rl.frameworks.dumps.read_rewards":
        "I/O: dispatches a log to its reader (the readers are C45's)",
    "ustat_rl.frameworks.logs_report.LogsReport.to_dict": "I/O: JSON of a report",
    "ustat_rl.frameworks.rewards_only.RewardsReport.to_dict": "I/O: JSON of a report",
    "ustat_rl.frameworks.trajectory.WindowRecord.from_dict": "I/O: a trajectory line read back",
    "ustat_rl.frameworks.trajectory.append_record": "I/O: writes a trajectory line",
    "ustat_rl.frameworks.trajectory.read_trajectory": "I/O: reads a trajectory file",
    "ustat_rl.frameworks.universality.Universality.to_dict": "I/O: JSON of a verdict",
    "ustat_rl.frameworks.window.skipped_record": "I/O: the record of a window not estimated",
    "ustat_rl.interface.report.load_verify_json": "I/O: reads a verify JSON",
    "ustat_rl.interface.report.write_report": "I/O: writes verify's HTML report",
    "ustat_rl.pilot.allocation.PilotAllocation.to_dict": "I/O: JSON of an allocation",
    "ustat_rl.pilot.dynamic_sampling.DynamicSamplingReport.to_dict": "I/O: JSON of a report",
    "ustat_rl.pilot.replace_sampling.ReplaceReport.to_dict": "I/O: JSON of a report",
    "ustat_rl.pilot.report.GStarReport.to_dict": "I/O: JSON of a report",
    "ustat_rl.pilot.rollouts.Rollouts.save": "I/O: writes a pilot file",
    "ustat_rl.pilot.rollouts.Rollouts.load": "I/O: reads a pilot file",
    "ustat_rl.pilot.rollouts.check_rollouts_path": "I/O: a pilot file's path checked",
    "ustat_rl.pilot.rollouts.read_npz": "I/O: reads an .npz archive",
    "ustat_rl.pilot.rollouts.load_rollouts": "I/O: reads a pilot file",
    "ustat_rl.policies.transformer.checkpoints.save_policy": "I/O: writes a checkpoint",
    "ustat_rl.scores.spec.SketchSpec.from_meta": "I/O: a sketch's metadata read back",
    "ustat_rl.conformance.adapters.load_function": "I/O: imports the user's function by name",
    # ---- argument parsing
    "ustat_rl.interface.allocate":
        "argument parsing: the allocate subcommand's face (parse, call, print)",
    "ustat_rl.interface.logs": "argument parsing: the logs subcommand's face (parse, call, print)",
    "ustat_rl.interface.rewards":
        "argument parsing: the rewards subcommand's face (parse, call, print)",
    "ustat_rl.interface.cli.main": "argument parsing: the command line's dispatch",
    "ustat_rl.interface.dynamic_sampling.add_arguments": "argument parsing: the command's options",
    "ustat_rl.interface.dynamic_sampling.check_arguments":
        "argument parsing: the command's options checked",
    "ustat_rl.conformance.kit.run_command": "argument parsing: ustat-rl conformance's face",
    "ustat_rl.conformance.search.run_target": "argument parsing: ustat-rl conformance's face",
    "ustat_rl.conformance.search.usage": "argument parsing: a usage error",
    "ustat_rl.conformance.multichannel.run_multichannel_command":
        "argument parsing: ustat-rl conformance's face",
    "ustat_rl.frameworks.config.trainer_read":
        "argument parsing: refuses a config that sets what is read from the trainer",
    "ustat_rl.frameworks.trl_support.check_trl_version":
        "argument parsing: refuses an unsupported TRL",
    "ustat_rl.frameworks.trl_support.check_loss_masks":
        "argument parsing: refuses a loss mask the monitor cannot reproduce",
    "ustat_rl.scores.spec.SketchSpec.named": "argument parsing: a sketch's arguments checked",
    "ustat_rl.runs.script_args": "argument parsing: the simulation scripts' shared flags",
    "ustat_rl.runs.script_config":
        "argument parsing: the simulation scripts' options from their config",
    "ustat_rl.runs.sweeps.add_executor_arguments":
        "argument parsing: the scripts' --workers and --ray-address",
    "ustat_rl.runs.sweeps.executor_from_args":
        "argument parsing: the scripts' --workers and --ray-address",
    "ustat_rl.runs.sweeps.default_output": "argument parsing: the scripts' output folder",
    # ---- plotting
    "ustat_rl.interface.plotting": "plotting: figures of the simulation scripts",
    "ustat_rl.interface.plotting_allocation": "plotting: figures of the allocation study",
    "ustat_rl.interface.plotting_pilot": "plotting: the gstar report's figure",
    "ustat_rl.interface.plotting_training": "plotting: figures of the training studies",
    "ustat_rl.interface.plotting_trajectory": "plotting: the trajectory's figure",
    # ---- accessor
    "ustat_rl.advantages.multichannel.multichannel_rule_names": "accessor: the registry's names",
    "ustat_rl.frameworks.trl_monitor.GroupSizeMonitor.spec": "accessor: the run's projection",
    "ustat_rl.frameworks.trl_monitor.GroupSizeMonitor.records": "accessor: the records kept",
    "ustat_rl.frameworks.trl_monitor.GroupSizeMonitor.trajectory": "accessor: the trajectory path",
    "ustat_rl.frameworks.trl_monitor.GroupSizeMonitor.units": "accessor: the records' units note",
    "ustat_rl.frameworks.verl_monitor.VerlWindowMonitor.records": "accessor: the records kept",
    "ustat_rl.theory.gram.FactoredGram.size": "accessor: the number of prompts",
    "ustat_rl.theory.multichannel.ChannelMoments.n_prompts": "accessor: the number of prompts",
    "ustat_rl.runs.sweeps.LocalExecutor.in_process": "accessor: a stored flag",
    # ---- construction
    "ustat_rl.frameworks.demo":
        "construction: the demo's tokenizer, models, prompts, reward and trainer",
    "ustat_rl.frameworks.advice_task.draw_problems": "construction: the advice study's problems",
    "ustat_rl.frameworks.advice_task.task_model":
        "construction: the advice study's untrained model",
    "ustat_rl.frameworks.advice_task.warm_start":
        "construction: the advice study's warm-started model",
    "ustat_rl.frameworks.verl_worker.monitored_worker": "construction: a subclass of verl's worker",
    "ustat_rl.frameworks.verl_worker.verl_task_runner":
        "construction: verl's task runner with the monitored worker",
    "ustat_rl.policies.transformer.model.TransformerPolicy.to":
        "construction: moves the model to a device",
    "ustat_rl.scores.families.family_config": "construction: a model family's config",
    "ustat_rl.scores.families.build_family":
        "construction: a model of a family with random weights",
    "ustat_rl.training.transformer.supervised_warmup":
        "construction: the transformer policies' warm-up",
    # ---- verify runner
    "ustat_rl.claims.registry.ClaimResult.to_dict": "verify runner: verify --json's record",
    "ustat_rl.claims.registry.Check.detectable": "verify runner: a comparison's detectable "
                                                 "error, for --details and --json",
    "ustat_rl.claims.registry.detectable_error": "verify runner: the detectable error of a "
                                                 "comparison (benchmarks/power_audit.py)",
    "ustat_rl.claims.registry.register": "verify runner: registers a claim at import",
    "ustat_rl.claims.registry.load_checks": "verify runner: imports the claim modules",
    "ustat_rl.claims.registry.registry": "verify runner: the registered claims",
    "ustat_rl.interface.claims_compare": "verify runner: ustat-rl compare of two verify runs",
    "ustat_rl.interface.claims_display": "verify runner: verify's table",
    "ustat_rl.interface.claims_markdown": "verify runner: docs/claims.md",
    # ---- script infrastructure
    "ustat_rl.runs.records": "script infrastructure: the scripts' run records and tables",
    "ustat_rl.runs.sweeps.write_csv_atomic": "script infrastructure: the scripts' CSV output",
    "ustat_rl.runs.sweeps.order_rows": "script infrastructure: the scripts' row order",
    "ustat_rl.runs.sweeps.RayExecutor": "script infrastructure: the scripts' Ray cluster",
    "ustat_rl.runs.sweeps.import_ray": "script infrastructure: the scripts' Ray cluster",
    "ustat_rl.runs.sweeps.run_cells": "script infrastructure: runs the scripts' cells in processes",
    # ---- answering routes no claim executes: the to-do list
    "ustat_rl.advantages.multichannel.register_multichannel_rule": UNCLAIMED,
    "ustat_rl.conformance.search.bounded_calls": UNCLAIMED,
    "ustat_rl.frameworks.entry.WindowMonitor.skip": UNCLAIMED,
    "ustat_rl.frameworks.entry.WindowMonitor.weights": UNCLAIMED,
    "ustat_rl.frameworks.trl_monitor.GroupSizeMonitor.estimator": UNCLAIMED,
    "ustat_rl.frameworks.verl.verl_rollouts": UNCLAIMED,
    "ustat_rl.frameworks.verl_monitor.verl_rule": UNCLAIMED,
    "ustat_rl.frameworks.verl_monitor.verl_step_inputs": UNCLAIMED,
    "ustat_rl.frameworks.verl_monitor.monitor_step": UNCLAIMED,
    "ustat_rl.frameworks.verl_monitor.VerlWindowMonitor.step": UNCLAIMED,
    "ustat_rl.frameworks.verl_worker.worker_rows": UNCLAIMED,
    "ustat_rl.frameworks.verl_worker.gathered_rows": UNCLAIMED,
    "ustat_rl.frameworks.verl_worker.rank_share": UNCLAIMED,
    "ustat_rl.pilot.bootstrap.bootstrap_t_intervals": UNCLAIMED,
    "ustat_rl.scores.projectors.Projector": "declaration: the base class's covers and callback "
                                            "raise NotImplementedError; every projector overrides them",
    "ustat_rl.training.allocation.train_allocated": UNCLAIMED,
    # ---- added with the reward-variance filter, the flat-group report and the advice target
    "ustat_rl.claims.beyond_reach.small_pilot.power_at": "verify runner: the power C63's statement quotes, computed for its notes and tests",
    "ustat_rl.frameworks.flat_groups.FlatGroupWindow.to_dict": "I/O: a flat-group window made JSON-safe",
    "ustat_rl.frameworks.flat_groups.format_flat_groups": "printing: the flat-group report in words",
    "ustat_rl.frameworks.variance_window.variance_filter_figures": UNCLAIMED,
    "ustat_rl.interface.dynamic_sampling.variance_filter_name": "argument parsing: which batch filter --group-filter names",
    "ustat_rl.interface.variance_filter.format_variance_filter": "printing: the reward-variance filter's table",
    "ustat_rl.pilot.critical_rollouts.CriticalRolloutIntervals.bounded": "accessor: whether the stored interval has a finite upper end",
    "ustat_rl.pilot.variance_filter.VarianceFilterReport.to_dict": "I/O: the filter report made JSON-safe",
    "ustat_rl.theory.variance_filter_kit.FilterVerdict.summary": "printing: a filter verdict in one line",
}
