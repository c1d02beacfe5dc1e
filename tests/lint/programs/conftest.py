"""The programs here are linted, never run: pytest must not collect them."""

collect_ignore_glob = ["*/*"]
