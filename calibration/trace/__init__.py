"""Scheduler traces of the machine set against the model's (``pi_trace``)."""
