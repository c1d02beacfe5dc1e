# A helper returns a dict literal: one key holds a timestamp used to name files, another the
# text the prompt uses. Reading one key by its name gives what was put there, not the others.
from datetime import datetime


def analyse(url: str) -> dict:
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    shot = f"shots/page_{stamp}.png"
    return {"url": url, "analysis": f"Summary of {url}", "screenshot": shot, "stamp": stamp}


def analyse_either(url: str, fast: bool) -> dict:
    if fast:
        return {"analysis": "quick look", "stamp": datetime.now().isoformat()}
    return {"analysis": f"deep look at {url}", "stamp": datetime.now().isoformat()}
