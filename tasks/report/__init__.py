"""The reproduction report: every area's claims.json gathered into one page per run."""
