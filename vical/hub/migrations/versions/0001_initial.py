"""The first schema: keys, submissions (with their job's lease), events.

Revision ID: 0001
Revises:
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "keys",
        sa.Column("key_id", sa.String(16), primary_key=True),
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("public_pem", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("approved_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("key_id", sa.String(16), sa.ForeignKey("keys.key_id"), nullable=False),
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("bundle_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("address", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_token", sa.String(32), nullable=True),
        sa.Column("lease_expires", sa.Float(), nullable=True),
        sa.Column("progress_done", sa.Integer(), nullable=True),
        sa.Column("progress_total", sa.Integer(), nullable=True),
        sa.Column("verdict", sa.Text(), nullable=True),
        sa.Column("report", sa.Text(), nullable=True),
        sa.Column("entry_id", sa.String(200), nullable=True),
        sa.Column("entry", sa.Text(), nullable=True),
    )
    op.create_index("ix_submissions_key_id", "submissions", ["key_id"])
    op.create_index("ix_submissions_entry_id", "submissions", ["entry_id"])
    op.create_index("ix_submissions_state_created", "submissions", ["state", "created_at"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
    )
    op.create_index("ix_events_submission_id", "events", ["submission_id"])


def downgrade() -> None:
    op.drop_table("events")
    op.drop_table("submissions")
    op.drop_table("keys")
