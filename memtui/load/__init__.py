"""File → snapshot: reading a snapshot file safely, whatever its format and compression.

``read.read_snapshot`` reads a file into a plain, normalized dict; ``fast`` (the compiled
scanner) and ``stream`` (the streaming decoder) read the device traces straight into
columns; ``source`` opens and decompresses; ``ahead`` starts the scan before the imports.

Nothing is imported here: the command line imports ``ahead`` and ``regular_file`` before
numpy and the readers, and importing a module of this package imports this file first.
"""
