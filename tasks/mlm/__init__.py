"""mmBERT-style encoder: three MLM phases on Ray Train, tracked and registered in MLflow."""
