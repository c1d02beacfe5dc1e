import anthropic

from pages import analyse, analyse_either

client = anthropic.Anthropic()


def ad_prompt(url: str):
    page = analyse(url)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Write an ad for this page.\n{page['analysis']}",
        messages=[{"role": "user", "content": page["screenshot"]}],
    )


def ad_prompt_either(url: str, fast: bool):
    page = analyse_either(url, fast) if fast else analyse(url)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Write an ad.\n{page['analysis']}",
        messages=[{"role": "user", "content": "go"}],
    )


def ad_prompt_stamped(url: str):
    page = analyse(url)
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Write an ad ({page['stamp']}).\n{page.get('analysis')}",  # PC001: 31
        messages=[{"role": "user", "content": "go"}],
    )
