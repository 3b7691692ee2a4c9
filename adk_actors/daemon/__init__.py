"""The daemon: `adk serve`, the /dev/v1 developer API, the console page and the legacy
endpoint (see README.md)."""
