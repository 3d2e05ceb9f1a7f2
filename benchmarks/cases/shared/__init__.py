"""Measuring code shared by several cases (a step to time, a terminal to watch a first frame in)."""
