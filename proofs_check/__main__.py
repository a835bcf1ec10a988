"""``python -m proofs_check``: run every derivation and print the status table."""

import sys

from .runner import main

sys.exit(main(sys.argv[1:]))
