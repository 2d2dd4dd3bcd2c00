"""``vical hub``: the leaderboard as a service.

Teams upload signed results bundles over HTTP; the bundles go to a content-addressed
store and a verification job to a queue kept in the database; workers claim jobs under
a lease, run the verification in a child process with memory, CPU-time and file-size
limits, record the verdict and publish accepted entries to the leaderboard, which the
service shows as JSON and as server-rendered pages.

``config``  :class:`HubConfig`, from the command line and ``VICAL_HUB_*`` variables
``db``      the tables (SQLAlchemy 2), engines for SQLite and PostgreSQL, migrations
            (Alembic, ``vical/hub/migrations``)
``store``   the content-addressed bundle store: streamed, capped, hashed, durable
``queue``   claim with a lease, heartbeat, finish and release, each fenced by the
            lease token so a job is finished once
``job``     the child process a worker starts: verification and the leaderboard entry
``worker``  the worker loop (``vical hub worker``)
``auth``    request signatures with a team's registered Ed25519 key
``app``     the ASGI application (FastAPI): intake API, leaderboard, pages, health
``pages``   the server-rendered pages
``client``  ``vical submit --to URL`` and ``vical hub status``
``backup``  backup and restore of the database and the bundle store
``logs``    structured (JSON lines) logging
"""
