"""One module per rule, named ``pcNNN_<name>.py``; each module's docstring is its metadata."""
