"""Hubs kbuild publishes to: a local git-backed hub (one bare repo per repo id) and the HTTP
server that serves it with the Hugging Face Hub API (`kbuild hub serve`)."""
