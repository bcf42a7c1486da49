"""The evaluation hub: one service coordinating many stations (``evalstop hub``; docs/hub.md)."""
