//! The checks made on every open of the master's database:
//! SQLite's integrity check, every row's checksum, and the database against its
//! witness — so that damage done outside the manager stops the start instead of
//! serving fewer or different grants. `docs/protocol.md` ("Durability") lists what
//! they cannot detect.

use std::path::Path;

use rusqlite::Connection;

use super::api::Restored;
use super::{schema, witness};

/// The writer's running account of the table, recorded in the witness.
pub(super) struct Account {
    pub(super) db_id: [u8; 16],
    pub(super) seq: u64,
    pub(super) rows: u64,
    pub(super) digest: u64,
}

impl Account {
    pub(super) fn record(&self) -> witness::Record {
        witness::Record {
            db_id: self.db_id,
            seq: self.seq,
            rows: self.rows,
            digest: self.digest,
        }
    }
}

/// SQLite's own check of the file's structure (b-trees, free pages, record formats).
pub(super) fn integrity(conn: &Connection) -> Result<(), String> {
    let mut stmt = conn
        .prepare("PRAGMA integrity_check(5)")
        .map_err(|e| format!("cannot be read as an SQLite database ({e}): the file is damaged"))?;
    let lines: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect())
        .map_err(|e| format!("cannot be read as an SQLite database ({e}): the file is damaged"))?;
    if lines == ["ok"] {
        Ok(())
    } else {
        Err(format!(
            "fails SQLite's integrity check ({}): the file is damaged; restore it from a copy",
            lines.join("; ")
        ))
    }
}

/// Reads every row back, checking each checksum, and totals the table.
pub(super) fn load(conn: &Connection) -> Result<(Restored, Account), String> {
    let (db_id, seq): (String, i64) = conn
        .query_row("SELECT db_id, commit_seq FROM meta WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(|e| format!("its identity row (table meta) is missing or damaged: {e}"))?;
    let db_id = super::api::parse_db_id(&db_id)
        .ok_or_else(|| format!("its identity {db_id:?} (table meta) is damaged"))?;
    let mut account = Account {
        db_id,
        seq: seq as u64,
        rows: 0,
        digest: 0,
    };
    let mut restored = Restored::default();
    for row in schema::read_flows(conn)? {
        let (row, stored) = row.map_err(|m| format!("{m}: the file is damaged"))?;
        if schema::flow_checksum(&row) != stored {
            return Err(format!(
                "row {} fails its checksum (it now reads: flow {} named {:?}, {:?}, owner uid {} \
                 pid {}): the file was changed outside the manager; restore it from a copy",
                row.id, row.spec, row.name, row.class, row.owner.uid, row.owner.pid
            ));
        }
        account.rows += 1;
        account.digest = account.digest.wrapping_add(schema::id_digest(row.id));
        restored.rows.push(row);
    }
    for (node, instance, stored) in schema::read_holders(conn)? {
        if schema::holder_checksum(&node, instance) != stored {
            return Err(format!(
                "the agent row of node {node:?} fails its checksum: the file was changed outside the manager"
            ));
        }
        restored.holders.push((node, instance));
    }
    for (id, body, stored) in schema::read_jobs(conn)? {
        if schema::job_checksum(&id, &body) != stored {
            return Err(format!(
                "the row of job {id:?} fails its checksum: the file was changed outside the manager"
            ));
        }
        let record = serde_json::from_str(&body).map_err(|e| {
            format!("the row of job {id:?} does not decode ({e}): the file is damaged")
        })?;
        restored.jobs.push(record);
    }
    Ok((restored, account))
}

/// Whether the database holds at least what the witness saw committed.
pub(super) fn compare(db: &Account, found: witness::Found, wpath: &Path) -> Result<(), String> {
    let w = match found {
        witness::Found::Absent => return Ok(()),
        witness::Found::Unreadable => {
            return Err(format!(
                "its witness {} is unreadable (both records fail their checksums), so the \
                 database cannot be checked; move the witness away to start anyway",
                wpath.display()
            ))
        }
        witness::Found::Record(w) => w,
    };
    let hex = |b: [u8; 16]| format!("{:032x}", u128::from_be_bytes(b));
    if w.db_id != db.db_id {
        return Err(format!(
            "this is database {}, but its witness {} records database {}: the file was \
             replaced; restore the right one, or move the witness away to accept this one",
            hex(db.db_id),
            wpath.display(),
            hex(w.db_id)
        ));
    }
    if w.seq > db.seq {
        return Err(format!(
            "the database ends at transaction {} ({} flows), but transaction {} ({} flows) \
             was committed and acknowledged: {} transactions are missing (a truncated or \
             deleted WAL file, or an older copy of the database); restore the database, or \
             move {} away to accept the loss",
            db.seq,
            db.rows,
            w.seq,
            w.rows,
            w.seq - db.seq,
            wpath.display()
        ));
    }
    if w.seq == db.seq && (w.rows, w.digest) != (db.rows, db.digest) {
        return Err(format!(
            "holds {} flows where transaction {} left {} (or other rows): rows were lost or \
             added outside the manager; restore the database, or move {} away to accept it",
            db.rows,
            w.seq,
            w.rows,
            wpath.display()
        ));
    }
    Ok(())
}
