"""What a worker process receives to run one cell of a sweep (private to :mod:`ustat_rl.runs.sweeps`).

A simulation script is not an importable module: it runs as ``__main__`` or is loaded by path.
Its cell function therefore travels as the script's source text, which the worker executes once
under a private module name; objects of the script's own classes in the cell's arguments are
pickled by name and looked up in that module when the worker unpickles them. Functions of
importable modules (the library, or anything on the workers' path) travel by reference.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib
import importlib.util
import io
import os
import pickle
import signal
import sys
import threading
import time
import types
from dataclasses import dataclass
from pathlib import Path

_SCRIPTS: dict[str, types.ModuleType] = {}  # source digest -> module, per worker process
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
#: Seconds between two looks of a worker's watchdog thread at its parent process id.
WATCH_INTERVAL = 0.5


def _watchdog(parent_pid: int, interval: float) -> None:
    while True:
        time.sleep(interval)
        if os.getppid() != parent_pid:
            os._exit(1)  # the driver is gone (we were re-parented): nobody wants our results


def watch_parent(parent_pid: int, interval: float = WATCH_INTERVAL) -> None:
    """End this worker process when the driver ``parent_pid`` dies (a pool initializer).

    On Linux the kernel delivers SIGTERM at the driver's death, even while the worker runs
    compiled code that holds the GIL; a daemon thread polling ``os.getppid()`` every
    ``interval`` seconds covers other systems. A driver that died before this ran is caught by
    the first look.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        except (OSError, AttributeError):
            pass  # no prctl: the thread below still watches
    if os.getppid() != parent_pid:
        os._exit(1)
    threading.Thread(target=_watchdog, args=(parent_pid, interval), daemon=True,
                     name="ustat-rl-parent-watch").start()


@dataclass(frozen=True)
class CellTask:
    """One cell: ``payload`` pickles ``(fn, args)``, or only ``args`` when ``source`` is set.

    Attributes
    ----------
    payload : bytes
    module : str
        Name of the script module in the driver (what the payload's references say).
    qualname : str
        The cell function's name inside the script.
    source : str or None
        The script's text, or None when ``fn`` is importable where the worker runs.
    filename : str
        The script's path, for tracebacks.
    """

    payload: bytes
    module: str = ""
    qualname: str = ""
    source: str | None = None
    filename: str = ""


def _importable(module) -> bool:
    """Whether ``import module.__name__`` gives this same module (so workers can import it)."""
    name = getattr(module, "__name__", "__main__")
    if name == "__main__":
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = getattr(module, "__file__", None)
    return spec is not None and (origin is None or spec.origin is None
                                 or Path(spec.origin).resolve() == Path(origin).resolve())


def make_task(fn, args: tuple) -> CellTask:
    """Package ``fn(*args)`` for another process."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    if (module is None or _importable(module) or not isinstance(fn, types.FunctionType)
            or "<locals>" in fn.__qualname__):
        return CellTask(pickle.dumps((fn, args)))
    filename = getattr(module, "__file__", None)
    if filename is None:
        raise TypeError(f"cell function {fn.__qualname__!r} lives in module {module.__name__!r}, "
                        "which is neither importable nor loaded from a file")
    return CellTask(pickle.dumps(args), module.__name__, fn.__qualname__,
                    Path(filename).read_text(), str(filename))


class _ScriptUnpickler(pickle.Unpickler):
    """Looks names of the driver's script module up in the worker's copy of it."""

    def __init__(self, data: bytes, name: str, module: types.ModuleType):
        super().__init__(io.BytesIO(data))
        self._name, self._module = name, module

    def find_class(self, module, name):
        if module == self._name:
            return functools.reduce(getattr, name.split("."), self._module)
        return super().find_class(module, name)


def _load_script(task: CellTask) -> types.ModuleType:
    digest = hashlib.sha256(task.source.encode()).hexdigest()
    if digest not in _SCRIPTS:
        name = f"_ustat_rl_script_{digest[:16]}"
        module = types.ModuleType(name)
        module.__file__ = task.filename
        sys.modules[name] = module  # dataclasses look their module up there
        exec(compile(task.source, task.filename, "exec"), module.__dict__)
        _SCRIPTS[digest] = module
    return _SCRIPTS[digest]


def run_task(task: CellTask):
    """Run one packaged cell (in a worker process) and return its result."""
    if task.source is None:
        fn, args = pickle.loads(task.payload)
    else:
        module = _load_script(task)
        fn = functools.reduce(getattr, task.qualname.split("."), module)
        args = _ScriptUnpickler(task.payload, task.module, module).load()
    return fn(*args)
