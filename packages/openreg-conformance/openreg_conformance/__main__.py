import sys

from openreg_conformance.cli import main

sys.exit(main())
