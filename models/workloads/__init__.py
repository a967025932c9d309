"""Workloads: scripts of kernel primitives that drive the mechanisms."""
