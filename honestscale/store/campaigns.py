"""Campaigns and their Slurm jobs in the store: every statement the campaign code needs, in one place.

Tables: ``campaigns`` (a spec and the runs it plans) and ``slurm_jobs`` (migration 0002: one row per run
submitted, with its job id, the exact script and the last state seen).
"""

from __future__ import annotations

from honestscale.store._database import Connection


def record_campaign(con: Connection, name: str, spec_json: str, series: list[str], reason: str) -> list[str]:
    """The campaign's spec (with the runs it plans), replacing an earlier one of the same name.

    ``series`` are the run-id prefixes (without ``-r<repetition>``) the new spec plans. Stored runs of the campaign
    in a series the earlier spec planned and this one does not are marked superseded (with ``reason``: what
    changed); runs of a series planned again are not. Returns the run ids marked now.
    """
    con.execute("BEGIN")
    try:
        con.execute(
            "DELETE FROM superseded_runs WHERE campaign = ? AND regexp_replace(run_id, '-r[0-9]+$', '') IN "
            "(SELECT unnest(?::VARCHAR[]))",
            [name, series],
        )
        # no ON CONFLICT, no RETURNING: a DuckLake store has no keys
        marked = con.execute(
            """
            SELECT r.run_id FROM runs r
            WHERE r.campaign = ? AND regexp_replace(r.run_id, '-r[0-9]+$', '') NOT IN (SELECT unnest(?::VARCHAR[]))
              AND regexp_replace(r.run_id, '-r[0-9]+$', '') IN (
                  SELECT regexp_replace(unnest(CAST(spec -> '$.planned_runs' AS VARCHAR[])), '-r[0-9]+$', '')
                  FROM campaigns WHERE name = ?)
              AND r.run_id NOT IN (SELECT run_id FROM superseded_runs)
            """,
            [name, series, name],
        ).fetchall()
        if marked:
            con.execute(
                "INSERT INTO superseded_runs SELECT unnest(?::VARCHAR[]), ?, ?, current_timestamp",
                [[str(r[0]) for r in marked], name, reason],
            )
        con.execute(
            "MERGE INTO campaigns USING (SELECT ? AS name, ?::JSON AS spec) s ON campaigns.name = s.name "
            "WHEN MATCHED THEN UPDATE SET spec = s.spec "
            "WHEN NOT MATCHED THEN INSERT (name, created_at, spec) VALUES (s.name, current_timestamp, s.spec)",
            [name, spec_json],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return sorted(str(r[0]) for r in marked)


def previous_spec(con: Connection, name: str) -> str | None:
    """The spec recorded for ``name`` (JSON), if any."""
    rows = con.execute("SELECT spec FROM campaigns WHERE name = ?", [name]).fetchall()
    return str(rows[0][0]) if rows and rows[0][0] else None


def runs_not_ok(con: Connection, campaign: str) -> list[str]:
    """Run ids of the campaign that did not end in success."""
    rows = con.execute("SELECT run_id FROM runs WHERE campaign = ? AND status <> 'success'", [campaign])
    return [str(r[0]) for r in rows.fetchall()]


def run_statuses(con: Connection, campaign: str) -> dict[str, str]:
    """run id -> status of every run of the campaign in the store."""
    rows = con.execute("SELECT run_id, status FROM runs WHERE campaign = ?", [campaign]).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def submitted_runs(con: Connection, campaign: str) -> set[str]:
    """Run ids of the campaign that were ever submitted to Slurm."""
    rows = con.execute("SELECT DISTINCT run_id FROM slurm_jobs WHERE campaign = ?", [campaign]).fetchall()
    return {str(r[0]) for r in rows}


def record_job(con: Connection, campaign: str, run_id: str, job_id: str, point: str, script: str) -> None:
    """A run just submitted: its job id and the exact script, state PENDING."""
    con.execute(
        "INSERT INTO slurm_jobs SELECT ?, ?, ?, ?, ?, current_timestamp, 'PENDING', NULL, NULL, current_timestamp "
        "WHERE NOT EXISTS (SELECT 1 FROM slurm_jobs WHERE campaign = ? AND run_id = ? AND job_id = ?)",
        [campaign, run_id, job_id, point, script, campaign, run_id, job_id],
    )


def latest_jobs(con: Connection, campaign: str) -> list[tuple[str, str, str | None]]:
    """(run_id, job_id, last state) of the latest submission of each run."""
    rows = con.execute(
        "SELECT run_id, arg_max(job_id, submitted_at), arg_max(state, submitted_at) FROM slurm_jobs "
        "WHERE campaign = ? GROUP BY run_id ORDER BY run_id",
        [campaign],
    ).fetchall()
    return [(str(r[0]), str(r[1]), r[2]) for r in rows]


def update_job(
    con: Connection,
    campaign: str,
    run_id: str,
    job_id: str,
    state: str,
    reason: str | None,
    exit_code: str | None,
) -> None:
    """The last state Slurm (or the run's events) gave for one job."""
    con.execute(
        "UPDATE slurm_jobs SET state = ?, reason = ?, exit_code = coalesce(?, exit_code), updated_at = current_timestamp "
        "WHERE campaign = ? AND run_id = ? AND job_id = ?",
        [state, reason, exit_code, campaign, run_id, job_id],
    )


def schema_version(con: Connection) -> int | None:
    """The store's schema version."""
    row = con.execute("SELECT max(version) FROM schema_version").fetchall()[0]
    return int(row[0]) if row and row[0] is not None else None
