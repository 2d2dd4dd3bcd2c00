"""vical: the reproducible distribution of the V-ICAL benchmark."""

__version__ = "0.1.0"
