"""`python -m sequence_ai_lab.evaluation`: the evaluation's command line (evaluation/cli.py)."""

import sys

from sequence_ai_lab.evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())
