"""Reliability: how often a job of N accelerators is interrupted, what a checkpoint costs,
and how often to take one."""
