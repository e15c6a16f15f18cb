"""The scam area: Scam2Prompt blocklists, the safe crawl, prompt synthesis, the code audit."""
