"""Run infrastructure: parameter sweeps over worker processes, their cell tasks, run records,
script options.

* :mod:`.sweeps`: cells of a parameter grid run in order or in parallel, seeded per cell;
* :mod:`.records`: the JSON record written next to every output;
* :mod:`.script_config`: a simulation script's options built from its ``Config`` dataclass.
"""
