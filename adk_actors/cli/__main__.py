"""``python -m adk_actors.cli``: the same as the ``adk`` console script."""

from adk_actors.cli.main import main

main()
