"""mmBERT's phased multilingual corpus."""
