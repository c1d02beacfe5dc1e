"""Human-readable dates."""

from datetime import datetime, timezone
from zoneinfo import ZoneInfo


def pretty_date(moment: datetime, tz: str) -> str:
    return moment.astimezone(ZoneInfo(tz)).strftime("%A, %d %B %Y %H:%M:%S %Z")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
