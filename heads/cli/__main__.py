import sys

from heads.cli import main

sys.exit(main())
