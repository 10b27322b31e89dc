"""One options table, from the code (``stacks/options.py``): every option described and bounded once.

docs/deploy.md prints ``markdown_table()``, so a page whose bound differs from the code's (as
``mapMaxConcurrency`` once read 1-40 while the code took 1-1000) fails here; and each documented
bound is the one the synth enforces: a value just outside it is refused, naming the option.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.config import DEFAULTS, IpmetaConfig
from stacks.constants import REPO_ROOT
from stacks.options import OPTIONS, markdown_table

DEPLOY_PAGE = Path(REPO_ROOT) / "docs" / "deploy.md"
BOUNDED = sorted(key for key, option in OPTIONS.items() if option.low is not None)


def test_every_option_has_a_description_and_nothing_else_is_described() -> None:
    assert list(OPTIONS) == list(DEFAULTS)
    assert [key for key, option in OPTIONS.items() if len(option.description) < 10] == []


def test_the_deploy_page_prints_the_table_of_the_code() -> None:
    page = DEPLOY_PAGE.read_text(encoding="utf-8")
    assert markdown_table(DEFAULTS) in page
    assert "| `mapMaxConcurrency` | `8` | 1–1000 |" in page


def test_the_readme_links_to_the_table_rather_than_copying_it() -> None:
    readme = (Path(REPO_ROOT) / "README.md").read_text(encoding="utf-8")
    assert "docs/deploy.md#context-options" in readme
    assert "| `mapMaxConcurrency`" not in readme


@pytest.mark.parametrize("key", BOUNDED)
def test_each_documented_bound_is_the_one_the_synth_enforces(key: str) -> None:
    option = OPTIONS[key]
    assert option.low is not None
    below = option.low - (1 if option.low == int(option.low) else 0.01)
    with pytest.raises(ValueError, match=key):
        IpmetaConfig.model_validate({key: below})
    if option.high is not None:
        with pytest.raises(ValueError, match=key):
            IpmetaConfig.model_validate({key: option.high + 1})


def test_a_changed_bound_would_show_on_the_page() -> None:
    # Given the table with mapMaxConcurrency's bound as the page once had it
    option = OPTIONS["mapMaxConcurrency"]
    assert (option.low, option.high) == (1, 1000)
    assert option.problem("mapMaxConcurrency", 41) is None
    assert option.problem("mapMaxConcurrency", 1001) == "mapMaxConcurrency must be 1..1000"


def test_the_feeds_option_says_how_to_name_the_network_lists() -> None:
    description = OPTIONS["feeds"].description
    assert '{"vendor": "network", "edition": "aws,tor,apple-relay"}' in description
    assert "one schedule for the set" in description
    assert description in DEPLOY_PAGE.read_text(encoding="utf-8")
