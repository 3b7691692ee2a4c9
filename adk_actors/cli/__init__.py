"""The ``adk`` command line: run agents from config files, serve the daemon, inspect it."""
