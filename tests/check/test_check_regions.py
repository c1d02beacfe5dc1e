"""``causes.differing_regions`` on the texts check compares: each stretch where the second
rendering differs from the first, counted against the values the test itself changed."""

from __future__ import annotations

from promptcache.check.causes import differing_regions

SENTENCE = "Step {n}: read the file, then check the result before the next step. "


def test_a_repetitive_template_with_every_value_changed_gives_one_region_per_value() -> None:
    # 200 copies of one sentence (about 14,000 characters), each with its own number: a
    # character diff of this costs the product of the lengths; token pairs are linear
    old = "".join(SENTENCE.format(n=k) for k in range(200))
    new = "".join(SENTENCE.format(n=k + 1000) for k in range(200))
    regions = differing_regions(old, new)
    # a region is widened to the whole word, a clock's colon included
    assert [(r.before, r.after) for r in regions] == [(f"{k}:", f"{k + 1000}:") for k in range(200)]


def test_an_inserted_sentence_is_one_region_among_equal_ones() -> None:
    old = "".join(SENTENCE.format(n=k) for k in range(50))
    new = old[: len(old) // 2] + "Now: 12:31:07. " + old[len(old) // 2 :]
    regions = differing_regions(old, new)
    assert len(regions) == 1
    assert "12:31:07" in regions[0].after
    assert regions[0].before in old


def test_values_of_other_lengths_in_a_template() -> None:
    old = "id=7 at 9:05 user=alice"
    new = "id=1234 at 10:45 user=alice"
    assert [(r.before, r.after) for r in differing_regions(old, new)] == [
        ("7", "1234"),
        ("9:05", "10:45"),
    ]


def test_a_long_part_whose_token_count_changed_is_one_region() -> None:
    # over 1,000 tokens with words inserted: one region from the first change to the last
    old = "".join(SENTENCE.format(n=k) for k in range(100))
    new = "".join(SENTENCE.format(n=k) + ("x " if k in (10, 90) else "") for k in range(100))
    regions = differing_regions(old, new)
    assert len(regions) == 1
    # the region runs from the first inserted word to the last, the sentences between unchanged
    assert regions[0].after.startswith("x Step 11:")
    assert regions[0].after.endswith("next step. x")
    assert regions[0].before == regions[0].after[2:-2]
