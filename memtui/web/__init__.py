"""The explorer in a browser, through textual-serve (optional extra ``memtui[web]``)."""
