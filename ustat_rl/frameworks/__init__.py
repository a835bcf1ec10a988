"""The theory inside the frameworks people train with (docs/theory.md C17, C18, C32).

* :mod:`.trajectory`: the trajectory file, one record per monitored window of a training run
  (``c1``, ``c2``, ``c3'``, ``G*`` with intervals, predicted and observed all-equal groups);
* :mod:`.universality`: whether one ``G`` lies inside every window's interval for ``G*``, at a
  stated simultaneous level (``ustat-rl gstar --trajectory``);
* :mod:`.window`: the estimates of one window from grouped rewards and sketched scores, the same
  computation as ``ustat-rl gstar`` on the same groups;
* :mod:`.gather`: rows gathered across data-parallel processes before estimation;
* :mod:`.entry`: :class:`WindowMonitor`, the monitor any training loop calls once per step;
  :mod:`.config`: :class:`MonitorConfig`, its settings in one frozen, checked object;
* :mod:`.trl_monitor`: :class:`GroupSizeMonitor`, its adapter for TRL's ``GRPOTrainer`` (a
  callback; the ``trl`` extra);
* :mod:`.verl_monitor`: :class:`VerlWindowMonitor`, the entry fed by verl's ``DataProto`` batches
  (the ``verl`` extra); :mod:`.verl_worker`: :func:`monitored_worker` and
  :func:`verl_task_runner`, that adapter inside verl's actor worker;
* :mod:`.demo`: a GRPO run small enough for a laptop CPU (tests, notebook 07, the benchmark);
* :mod:`.advice_task`: graded addition with a warm-started Qwen2, a task where the group size
  matters (``simulations/advice_study.py``, docs/advice_wins.md);
* :mod:`.grouped`, :mod:`.verl`, :mod:`.dumps`: grouped rewards without scores from a verl batch,
  verl's rollout dumps and TRL's completion logs; :mod:`.rewards_only`: what they say alone.

Nothing here imports ``trl`` until a monitor is attached, nor ``verl`` until the verl hook is built
(:func:`monitored_worker`, :func:`verl_task_runner`).
"""

from __future__ import annotations

__all__ = ["WindowMonitor", "GroupSizeMonitor", "demo_trainer", "TRAJECTORY_FIELDS", "read_trajectory",
           "append_record", "window_record", "gather_rows", "gstar_universality",
           "format_universality", "synthetic_record", "gstar_errors_of"]

_LAZY = {"WindowMonitor": ".entry", "GroupSizeMonitor": ".trl_monitor", "demo_trainer": ".demo",
         "TRAJECTORY_FIELDS": ".trajectory", "read_trajectory": ".trajectory",
         "append_record": ".trajectory", "window_record": ".window", "gather_rows": ".gather",
         "gstar_universality": ".universality", "format_universality": ".universality",
         "synthetic_record": ".synthetic", "gstar_errors_of": ".trajectory"}

# the reward-only adapters (verl batches, verl dumps, TRL completion logs)
__all__ += ["GroupedRewards", "verl_rewards", "verl_rollouts", "read_verl_dump",
            "read_trl_completions", "read_rewards", "rewards_report"]
_LAZY.update({"GroupedRewards": ".grouped", "verl_rewards": ".verl", "verl_rollouts": ".verl",
              "read_verl_dump": ".dumps", "read_trl_completions": ".dumps",
              "read_rewards": ".dumps", "rewards_report": ".rewards_only"})

__all__ += ["SyntheticErrors", "SyntheticWindow", "WindowRecord", "RecordInterval"]
_LAZY.update(dict.fromkeys(["SyntheticErrors", "SyntheticWindow"], ".synthetic"))
_LAZY.update(dict.fromkeys(["WindowRecord", "RecordInterval"], ".trajectory"))
__all__ += ["MonitorConfig", "Schedule", "EstimatorConfig", "LossWeighting", "Outputs"]
_LAZY.update(dict.fromkeys(["MonitorConfig", "Schedule", "EstimatorConfig", "LossWeighting", "Outputs"],
                           ".config"))
__all__ += ["VerlWindowMonitor", "verl_step_inputs", "Generation", "DemoSetup"]
_LAZY.update({"VerlWindowMonitor": ".verl_monitor", "verl_step_inputs": ".verl_monitor",
              "Generation": ".generation", "DemoSetup": ".demo"})
__all__ += ["monitored_worker", "verl_task_runner"]
_LAZY.update({"monitored_worker": ".verl_worker", "verl_task_runner": ".verl_worker"})


#: The extra that installs what an entry imports (pyproject.toml's optional dependencies).
_EXTRAS = {"GroupSizeMonitor": "trl", "demo_trainer": "trl", "monitored_worker": "verl",
           "verl_task_runner": "verl"}


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module

        try:
            module = import_module(_LAZY[name], __name__)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").partition(".")[0]
            if not missing or missing == "ustat_rl":  # this project's own: a bug, as it is
                raise
            extra = _EXTRAS.get(name)
            what, how = ((f"the optional package {missing!r}", f"'ustat-rl[{extra}]'") if extra
                         else (f"the package {missing!r}", missing))
            raise ModuleNotFoundError(f"{name} needs {what}, which is not installed: pip "
                                      f"install {how}", name=exc.name) from None
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
