"""Timers: the timer wheel, placement (push heuristic vs timer-migration pull), idle states."""

MECHANISMS: dict = {}
WORKLOADS: dict = {}
