//! The database's tables (schema version 3), the moves from versions 1 and 2, the
//! per-row checksums, and reading every row back with its checksum verified
//! (a bit flip must not change or drop a grant silently).
//!
//! - `flows`: one row per granted flow, numbered by the master in grant order, with a
//!   `checksum` over every field and the id;
//! - `agents`: the agent instance holding each node, checksummed;
//! - `meta`: one row: the database's identity (`db_id`) and the number of the last
//!   transaction committed (`commit_seq`), which the witness file is checked against.

use rusqlite::{params, Connection, Transaction};

use super::super::state::FlowRow;
use crate::protocol::{ClassSpec, EndpointSpec, FlowSpec, Owner};

/// The schema version this build writes.
pub const VERSION: i64 = 3;

/// The tables of version 3.
pub const CREATE: &str = "
CREATE TABLE flows (
    id        INTEGER PRIMARY KEY,
    src_node  TEXT    NOT NULL,
    src_port  INTEGER NOT NULL,
    dst_node  TEXT    NOT NULL,
    dst_port  INTEGER NOT NULL,
    priority  INTEGER NOT NULL,
    name      TEXT    NOT NULL,
    class     TEXT    NOT NULL,
    bandwidth INTEGER NOT NULL,
    weight    INTEGER NOT NULL,
    owner_uid INTEGER NOT NULL,
    owner_pid INTEGER NOT NULL,
    checksum  INTEGER NOT NULL
);
CREATE TABLE agents (
    node      TEXT    PRIMARY KEY,
    instance  INTEGER NOT NULL,
    checksum  INTEGER NOT NULL
);
CREATE TABLE meta (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    db_id      TEXT    NOT NULL,
    commit_seq INTEGER NOT NULL
);
";

/// Version 1 keyed rows by the flow (a second b-tree written at every commit); its
/// rows move to version 2 keeping their grant order: renamed away, the version-2
/// table created, the rows copied, the old table dropped.
const V1_TO_V2: &str = "
ALTER TABLE flows RENAME TO flows_v1;
CREATE TABLE flows (
    id        INTEGER PRIMARY KEY,
    src_node  TEXT    NOT NULL,
    src_port  INTEGER NOT NULL,
    dst_node  TEXT    NOT NULL,
    dst_port  INTEGER NOT NULL,
    priority  INTEGER NOT NULL,
    name      TEXT    NOT NULL,
    class     TEXT    NOT NULL,
    bandwidth INTEGER NOT NULL,
    weight    INTEGER NOT NULL,
    owner_uid INTEGER NOT NULL,
    owner_pid INTEGER NOT NULL
);
INSERT INTO flows (id, src_node, src_port, dst_node, dst_port, priority, name, class,
                   bandwidth, weight, owner_uid, owner_pid)
    SELECT rowid, src_node, src_port, dst_node, dst_port, priority, name, class,
           bandwidth, weight, owner_uid, owner_pid FROM flows_v1 ORDER BY rowid;
DROP TABLE flows_v1;
";

/// Version 2 lacks the checksums and the `agents` and `meta` tables.
const V2_TO_V3: &str = "
ALTER TABLE flows ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0;
CREATE TABLE agents (
    node      TEXT    PRIMARY KEY,
    instance  INTEGER NOT NULL,
    checksum  INTEGER NOT NULL
);
CREATE TABLE meta (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    db_id      TEXT    NOT NULL,
    commit_seq INTEGER NOT NULL
);
";

/// The first 8 bytes of the SHA-256 of `parts`, each length-prefixed (so no two
/// different rows encode alike), as SQLite's signed integer.
pub(super) fn digest(parts: &[&[u8]]) -> i64 {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(&(p.len() as u64).to_le_bytes());
        ctx.update(p);
    }
    let d = ctx.finish();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d.as_ref()[..8]);
    i64::from_le_bytes(b)
}

/// A flow row's stored columns besides its id (class as text, bandwidth, weight).
pub fn class_columns(c: &ClassSpec) -> (&'static str, i64, i64) {
    match *c {
        ClassSpec::Premium { bandwidth } => ("premium", bandwidth as i64, 0),
        ClassSpec::BestEffort { weight } => ("best_effort", 0, weight as i64),
    }
}

/// The checksum of a flow row: every column, the id included, as stored.
pub fn flow_checksum(r: &FlowRow) -> i64 {
    let (class, bw, w) = class_columns(&r.class);
    digest(&[
        b"flows/3",
        &r.id.to_le_bytes(),
        r.spec.src.node.as_bytes(),
        &r.spec.src.port.to_le_bytes(),
        r.spec.dst.node.as_bytes(),
        &r.spec.dst.port.to_le_bytes(),
        &[r.spec.priority],
        r.name.as_bytes(),
        class.as_bytes(),
        &bw.to_le_bytes(),
        &w.to_le_bytes(),
        &r.owner.uid.to_le_bytes(),
        &r.owner.pid.to_le_bytes(),
    ])
}

/// The job reservations, one row each, the record as JSON (a pattern and its node
/// list, or an explicit list: a few kilobytes, never a row per flow). Outside the
/// witness's count of flow rows; each row is checksummed. Created in any version-3
/// database that lacks it.
pub const JOBS: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id        TEXT    PRIMARY KEY,
    body      TEXT    NOT NULL,
    checksum  INTEGER NOT NULL
);
";

/// The checksum of a `jobs` row.
pub fn job_checksum(id: &str, body: &str) -> i64 {
    digest(&[b"jobs/3", id.as_bytes(), body.as_bytes()])
}

/// Every `jobs` row: (id, body, stored checksum).
pub fn read_jobs(conn: &Connection) -> Result<Vec<(String, String, i64)>, String> {
    let sql = |e: rusqlite::Error| e.to_string();
    let mut stmt = conn
        .prepare("SELECT id, body, checksum FROM jobs ORDER BY id")
        .map_err(sql)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(sql)?;
    rows.collect::<Result<_, _>>().map_err(sql)
}

/// The checksum of an `agents` row.
pub fn holder_checksum(node: &str, instance: u64) -> i64 {
    digest(&[b"agents/3", node.as_bytes(), &instance.to_le_bytes()])
}

/// What a row id adds to the witness's digest of the set of rows.
pub fn id_digest(id: i64) -> u64 {
    digest(&[b"id", &id.to_le_bytes()]) as u64
}

/// Moves a version-1 or version-2 database to version 3 inside `tx`: the rows get
/// their checksums, the database its identity.
pub fn upgrade(tx: &Transaction<'_>, from: i64, db_id: &str) -> Result<(), String> {
    let sql = |e: rusqlite::Error| e.to_string();
    if from == 1 {
        tx.execute_batch(V1_TO_V2).map_err(sql)?;
    }
    tx.execute_batch(V2_TO_V3).map_err(sql)?;
    for row in read_flows(tx)? {
        let (row, _) = row?;
        tx.execute(
            "UPDATE flows SET checksum = ?1 WHERE id = ?2",
            params![flow_checksum(&row), row.id],
        )
        .map_err(sql)?;
    }
    tx.execute(
        "INSERT INTO meta (id, db_id, commit_seq) VALUES (1, ?1, 0)",
        params![db_id],
    )
    .map_err(sql)?;
    tx.pragma_update(None, "user_version", VERSION)
        .map_err(sql)?;
    Ok(())
}

/// Every flow row in grant order, decoded, with the checksum stored beside it; a row
/// that does not decode is an error naming its id.
#[allow(clippy::type_complexity)]
pub fn read_flows(conn: &Connection) -> Result<Vec<Result<(FlowRow, i64), String>>, String> {
    let sql = |e: rusqlite::Error| e.to_string();
    let has_checksum = conn.prepare("SELECT checksum FROM flows LIMIT 0").is_ok();
    let mut stmt = conn
        .prepare(if has_checksum {
            "SELECT src_node, src_port, dst_node, dst_port, priority, name, class, bandwidth, \
             weight, owner_uid, owner_pid, id, checksum FROM flows ORDER BY id"
        } else {
            "SELECT src_node, src_port, dst_node, dst_port, priority, name, class, bandwidth, \
             weight, owner_uid, owner_pid, id, 0 FROM flows ORDER BY id"
        })
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        let id: Option<i64> = r.get(11).ok();
        out.push(decode(r).map_err(|m| match id {
            Some(id) => format!("row {id}: {m}"),
            None => m,
        }));
    }
    Ok(out)
}

fn decode(r: &rusqlite::Row<'_>) -> Result<(FlowRow, i64), String> {
    let get_i = |i: usize| r.get::<_, i64>(i).map_err(|e| e.to_string());
    let get_s = |i: usize| r.get::<_, String>(i).map_err(|e| e.to_string());
    let range = |what: &str| format!("{what} out of range");
    let port = |v: i64| u16::try_from(v).map_err(|_| range("port"));
    let class = match get_s(6)?.as_str() {
        "premium" => ClassSpec::Premium {
            bandwidth: u64::try_from(get_i(7)?).map_err(|_| range("bandwidth"))?,
        },
        "best_effort" => ClassSpec::BestEffort {
            weight: u32::try_from(get_i(8)?).map_err(|_| range("weight"))?,
        },
        other => return Err(format!("unknown class {other:?}")),
    };
    let row = FlowRow {
        id: get_i(11)?,
        spec: FlowSpec {
            src: EndpointSpec {
                node: get_s(0)?,
                port: port(get_i(1)?)?,
            },
            dst: EndpointSpec {
                node: get_s(2)?,
                port: port(get_i(3)?)?,
            },
            priority: u8::try_from(get_i(4)?).map_err(|_| range("priority"))?,
        },
        name: get_s(5)?,
        class,
        owner: Owner {
            uid: u32::try_from(get_i(9)?).map_err(|_| range("uid"))?,
            pid: u32::try_from(get_i(10)?).map_err(|_| range("pid"))?,
        },
    };
    Ok((row, get_i(12)?))
}

/// Every `agents` row: (node, instance, stored checksum).
pub fn read_holders(conn: &Connection) -> Result<Vec<(String, u64, i64)>, String> {
    let sql = |e: rusqlite::Error| e.to_string();
    let mut stmt = conn
        .prepare("SELECT node, instance, checksum FROM agents ORDER BY node")
        .map_err(sql)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)? as u64,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(sql)?;
    rows.collect::<Result<_, _>>().map_err(sql)
}
