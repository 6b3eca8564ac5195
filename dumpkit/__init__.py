"""dumpkit: reads Windows crash dumps of Python/TensorFlow processes and says what killed them."""

__version__ = "0.1.0"
