"""Texts for people: the devices table and the report of a model function."""

from .devices import devices_table
from .function import parse_shape, report_function

__all__ = ["devices_table", "parse_shape", "report_function"]
