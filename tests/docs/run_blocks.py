"""Run a page's code blocks in order, in the current folder: the child process of doc_examples.

Reads the JSON list of blocks (``where``, ``language``, ``code``, ``workdir``) named on the
command line; each block runs in its page's ``workdir``. A shell block runs in ``bash`` with
``-e -o pipefail`` (a failing command fails the block); a Python block is executed in one
namespace shared by its page's Python blocks (a new one for each page), as a reader's
interpreter session would be. After each block it prints ``@@block WHERE SECONDS``; at the first
block that fails it prints ``@@failed WHERE`` and exits 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path


def main(spec: str) -> int:
    namespace: dict = {}
    workdir = None
    for block in json.loads(Path(spec).read_text()):
        where, code = block["where"], block["code"]
        if block["workdir"] != workdir:  # a new page: its folder, a fresh namespace
            workdir = block["workdir"]
            os.chdir(workdir)
            namespace = {"__name__": "__main__"}
        print(f"@@start {where}", flush=True)
        start = time.perf_counter()
        if block["language"] == "python":
            try:
                exec(compile(code, where, "exec"), namespace)
                ok = True
            except BaseException:  # noqa: BLE001 - a SystemExit of the block fails it too
                traceback.print_exc()
                ok = False
        else:
            ok = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code]).returncode == 0
        sys.stdout.flush()
        sys.stderr.flush()
        if not ok:
            print(f"@@failed {where}", flush=True)
            return 1
        print(f"@@block {where} {time.perf_counter() - start:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
