"""Ingestion writes, one module per thing they own:

- `keys`: ingestion keys, created and revoked;
- `queue`: the durable queue of accepted requests as a drain sees it (claim, read, delete);
- `drain`: one drain transaction and the loop of them a worker runs;
- `apply`: applying one product's claimed requests, and finding the bad messages of a part
  that fails; `staging` is PostgreSQL's route to it, the messages staged in SQL;
- `dedup`: each messageId applied once per product (seen messageIds claimed, purged);
- `drops`: the drop log (what a drain could not apply, and why).
"""
