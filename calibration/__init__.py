"""Calibration: the native collector, measurement profiles, fitting and validation."""
