"""One module or package per command, named as the user types it."""
