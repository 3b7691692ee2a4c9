"""The ADK domain layer (later issues). The kernel lives in `supervision`."""
