# The time reaches the system text only through the sender's unseen calls, by way of the
# relay that passes it as three arguments: one note. Sent as the system text itself, it is
# found.
from datetime import datetime

from sender import relay, send_plain


def ask(question: str):
    return relay(f"asked at {datetime.now():%H:%M:%S}", question)


def ask_plain(question: str):
    return send_plain(f"asked at {datetime.now():%H:%M:%S}", question)  # PC001: 34
