"""Data files of the linter (the dated model-minimum table)."""
