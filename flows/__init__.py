"""Prefect flows: the whole pipeline and one flow per area, each stage run through DVC."""
