from .context import current_context, stable_rules

__all__ = ["current_context", "stable_rules"]
