"""This machine: a profile's calibration, its checks and its held-back composites."""

from app.explorer import ui

ui.machine_page()
