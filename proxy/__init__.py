"""Local proxy in front of vendor APIs or the bundled engine; logs cache usage to SQLite."""
