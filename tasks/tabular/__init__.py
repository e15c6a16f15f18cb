"""Data uncertainty in tabular deep learning (Kartashev, Rubachev, Babenko; arXiv 2509.04430)."""
