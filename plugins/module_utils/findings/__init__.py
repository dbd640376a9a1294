"""The findings catalog, the Finding type and the remedy texts and limits the catalog quotes.

Every package above parsers/ makes or reads findings, so this sits just above parsers/ and imports
nothing of gpuhost but the standard library. Pure: nothing here does I/O.
"""
