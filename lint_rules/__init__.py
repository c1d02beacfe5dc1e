"""`promptcache lint`: static analysis of Python code for what silently breaks prompt caching."""
