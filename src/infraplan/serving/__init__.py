"""Serving: how long an engine step takes, an event simulator of continuous batching, and a
capacity planner that finds the cheapest deployment meeting latency SLOs."""
