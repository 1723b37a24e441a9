"""``python -m minitf`` is the ``minitf`` command."""
import sys

from minitf.cli import main

sys.exit(main())
