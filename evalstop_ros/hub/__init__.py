"""The evaluation hub: one service coordinating many stations (``evalstop hub``).

* :mod:`.store` policies, stations (hashed, revocable keys), leased assignments, idempotent
  results and the global journal on PostgreSQL or SQLite (:mod:`.schema` migrations);
* :mod:`.app` the FastAPI service; :mod:`.page` the leaderboard page;
* :mod:`.leaderboard` ranking and pairwise sequential tests over the journal (online = offline);
* :mod:`.station_journal` a station's local journal (the station itself is :mod:`evalstop_ros.station`).

See docs/hub.md.
"""
