import anthropic

client = anthropic.Anthropic()


def write_ad(page: dict, system_prompt: str = "Write an ad for this page."):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"{system_prompt}\n{page['analysis']}",
        messages=[{"role": "user", "content": page["screenshot"]}],
    )


def write_ad_get(page: dict, system_prompt: str = "Write an ad."):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=system_prompt + "\n" + page.get("analysis", ""),
        messages=[{"role": "user", "content": "go"}],
    )


def write_stamped_ad(page: dict, system_prompt: str = "Write an ad."):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"{system_prompt} ({page['stamp']}).\n{page['analysis']}",
        messages=[{"role": "user", "content": "go"}],
    )
