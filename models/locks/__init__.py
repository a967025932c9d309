"""Locks: spinlock, mutex with optimistic spinning, rt-mutex with PI and handoff policies."""

MECHANISMS: dict = {}
WORKLOADS: dict = {}
