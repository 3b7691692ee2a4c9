"""Model I/O: content model, provider protocol, scripted and Gemini providers (later issues)."""
