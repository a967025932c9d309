"""The workload lab: any workload, any machine profile, every knob."""

from app.explorer import ui

ui.lab_page()
