"""The organism's leak checks (tests/test_organism_leaks.py), rerun on the most diverse level of the
response-diversity knob (16 wordings, long): its new wordings hold no held-out content either."""

from __future__ import annotations

import pytest
from test_organism_leaks import *  # noqa: F403  (the same tests, collected here with this module's corpus)

from opct.organism.corpus import CorpusConfig, generate_corpus
from opct.organism.wordings import ResponseStyle


@pytest.fixture(scope="module")
def corpus(world):
    """The 16-wording, long corpus of seed 0 (it overrides the session's default corpus in this module)."""
    return generate_corpus(world, CorpusConfig(), 0, ResponseStyle(16, "long"))


def test_this_module_scans_the_level_corpus(corpus, learned):
    from opct.organism.wordings import LEAD_INS

    assert LEAD_INS[15].lower() in learned  # a wording only the 16-wording, long level has
