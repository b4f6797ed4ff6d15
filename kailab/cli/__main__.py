"""`python -m kailab.cli`."""

from . import main

main()
