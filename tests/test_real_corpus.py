"""Every claimed file of the real corpus in tests/data is recognised without --format, and every listed fact is
read right (tests/real_corpus.py holds the expectations; `python tests/real_corpus.py` prints the counts)."""

from __future__ import annotations

import pytest
import real_corpus


@pytest.mark.heavy
def test_the_whole_real_corpus_is_recognised_and_its_facts_are_right():
    recognition, wrong, n_files, n_facts = real_corpus.score()
    assert n_files >= 100 and n_facts >= 30
    assert recognition == []
    assert wrong == []


def test_every_file_in_tests_data_is_claimed_or_said_unclaimed():
    for path in real_corpus.claimed_files():
        real_corpus.expected_format(str(path.relative_to(real_corpus.DATA)))  # KeyError if nobody said
