-- The login UI's rate limits, shared by every process on one PostgreSQL database (the embedded database
-- serves one process, which keeps them in memory and never writes here). One row per limited key (SHA-256
-- of the limiter and its key: a client address or a login name) and fixed window: the window starts with
-- its first attempt and ends `window_ends_at`; `hits` counts its attempts. UNLOGGED: counters of a minute
-- need no WAL and no crash safety (PostgreSQL empties the table after a crash, which only forgets them).
CREATE UNLOGGED TABLE login_rate_limits (
  key            text        PRIMARY KEY,
  hits           integer     NOT NULL,
  window_ends_at timestamptz NOT NULL
);
CREATE INDEX login_rate_limits_ends_idx ON login_rate_limits (window_ends_at);
