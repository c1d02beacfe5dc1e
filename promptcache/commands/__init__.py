"""One module per ``promptcache`` subcommand; each imports only click at module level."""
