"""The model cache: a second open of the same snapshot maps its columns instead of decoding.

``store.ModelCache`` keeps a snapshot's model under a key of the file and of the model's
schema (``names``), in the file format of ``fileformat`` and the layout of ``layout``.

Nothing is imported here: the command line asks ``names`` whether a model is kept before
numpy is imported, and importing a module of this package imports this file first.
"""
