"""`python -m sequence_ai_lab.demo`: see sequence_ai_lab/demo/run.py."""

import sys

from sequence_ai_lab.demo.run import main

sys.exit(main())
