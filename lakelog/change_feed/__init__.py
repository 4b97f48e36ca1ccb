"""The change data feed (Delta's ``changeDataFeed``): reading the rows each version changed
(``read``), and recording them when row-level operations change a table that has the feed on (``write``)."""

from .read import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, ChangeReader, change_schema, feed_enabled

__all__ = ["CHANGE_TYPE", "COMMIT_TIMESTAMP", "COMMIT_VERSION", "ChangeReader", "change_schema", "feed_enabled"]
