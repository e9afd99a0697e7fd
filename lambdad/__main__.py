"""``python -m lambdad``: the same as the ``lambdad`` command."""

from .cli import main

raise SystemExit(main())
