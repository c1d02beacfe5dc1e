import anthropic

client = anthropic.Anthropic()


def write_ad(page: dict):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Write an ad for this page.\n{page['analysis']}",
        messages=[{"role": "user", "content": page["screenshot"]}],
    )


def write_ad_get(page: dict):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system="Write an ad.\n" + page.get("analysis", ""),
        messages=[{"role": "user", "content": "go"}],
    )


def write_stamped_ad(page: dict):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=f"Write an ad ({page['stamp']}).\n{page['analysis']}",
        messages=[{"role": "user", "content": "go"}],
    )
