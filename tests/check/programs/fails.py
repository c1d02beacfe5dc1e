"""Prints a line, then exits with status 3."""

import sys

print("the program's own output")
sys.exit(3)
