"""python -m reconciler.cli"""

import sys

from reconciler.cli import main

sys.exit(main())
