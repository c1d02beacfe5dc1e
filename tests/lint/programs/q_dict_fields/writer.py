# A dict of known keys is passed to a helper (in another module) that reads one key into the
# prompt: only what was stored under that key reaches it, not the timestamp beside it. The
# look-alike helper reads the stamped key, and a dict of unknown keys keeps all its facts.
from datetime import datetime

from ads import write_ad, write_ad_get, write_stamped_ad
from pages import analyse

STYLE = "Write a short ad for this page."


def one_ad(url: str):
    page = analyse(url)
    return write_ad(page, system_prompt=STYLE)


def one_ad_get(url: str):
    page = {"analysis": f"Summary of {url}", "stamp": datetime.now().strftime("%H%M%S")}
    return write_ad_get(page, system_prompt=STYLE)


def stamped_ad(url: str):
    page = analyse(url)
    return write_stamped_ad(page, system_prompt=STYLE)  # PC001: 28


def unknown_ad(url: str, page: dict):
    page[url] = datetime.now().isoformat()
    return write_ad(page, system_prompt=STYLE)  # PC001: 20
