"""infraplan: plan, simulate and check AI infrastructure for training and serving models."""

__version__ = "0.1.0"
