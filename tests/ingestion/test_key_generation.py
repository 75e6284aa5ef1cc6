"""New ingestion keys can be passed to a command as they are printed: none begins
with '-' (an option to argparse) or '_'; about one key in 32 did before."""

from ingestion.models import generate_ingestion_key


def test_no_new_ingestion_key_begins_with_a_dash_or_underscore():
    keys = [generate_ingestion_key() for _ in range(2000)]

    assert all(key[0].isalnum() for key in keys)
    assert len(set(keys)) == len(keys) and all(len(key) == 43 for key in keys)
    # The URL-safe alphabet is kept inside a key.
    assert any("-" in key or "_" in key for key in keys)
