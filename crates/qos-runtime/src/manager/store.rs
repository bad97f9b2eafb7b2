//! Durable state of the master: the granted flows in an embedded SQLite database,
//! written with *group commit*.
//!
//! One writer thread owns the connection. Decisions are queued to it in the order the
//! master took them; it takes every job waiting, writes them in one transaction
//! (WAL journal; with [`Sync::Full`] the commit is on the device when it returns), and
//! only then runs each job's completion — which pushes the IDT updates and
//! acknowledges the request. So a grant is never acknowledged before it is on disk,
//! while many grants share one disk flush. After a crash the table holds every
//! acknowledged flow; a flow whose transaction did not commit was never acknowledged.
//!
//! A failed commit leaves memory ahead of disk, so the master stops (fail-stop) and its
//! restart rebuilds the books from the database alone.

use std::path::Path;
use std::sync::mpsc;
use std::thread;

use rusqlite::{params, Connection};

use super::state::{DbOp, FlowRow};
use crate::protocol::{ClassSpec, EndpointSpec, FlowSpec, Owner};

/// Why the database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A row that does not decode (edited by hand?).
    #[error("database {path}: bad row: {message}")]
    BadRow {
        /// The database file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// How far a commit goes before a grant is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sync {
    /// `synchronous = FULL`: the WAL is flushed to the device (fsync) at every commit;
    /// acknowledged grants survive a power failure. The default.
    #[default]
    Full,
    /// `synchronous = NORMAL`: the commit is written to the WAL file (the kernel's page
    /// cache) without fsync; acknowledged grants survive a crash or `kill -9` of the
    /// master, but the last ones may be lost if the machine itself loses power.
    Normal,
}

/// Run after the transaction holding a job commits.
pub type Completion = Box<dyn FnOnce() + Send>;

/// One decision's writes and what to do once they are durable.
pub struct Job {
    /// Inserts and deletes, in order.
    pub ops: Vec<DbOp>,
    /// Pushes IDT updates and acknowledges the request.
    pub done: Completion,
}

/// Handle to the writer thread.
#[derive(Clone)]
pub struct Store {
    tx: mpsc::Sender<Job>,
}

/// Largest number of jobs in one transaction.
const MAX_BATCH: usize = 4096;

/// Schema version 2. Rows are numbered by the master in grant order (`id`), so a
/// grant appends to the rightmost page and a release finds its row by id: a commit
/// writes few pages to the WAL, and there is no secondary index to keep. The master's
/// memory enforces one row per flow key.
const CREATE_FLOWS: &str = "
CREATE TABLE IF NOT EXISTS flows (
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
PRAGMA user_version = 2;
";

/// Version 1 keyed rows by the flow (a second b-tree written at every commit); its
/// rows move to version 2 in one transaction, keeping their grant order: renamed away,
/// the version-2 table created, the rows copied, the old table dropped.
const MOVE_V1_AWAY: &str = "ALTER TABLE flows RENAME TO flows_v1;";
const COPY_V1: &str = "
INSERT INTO flows (id, src_node, src_port, dst_node, dst_port, priority, name, class,
                   bandwidth, weight, owner_uid, owner_pid)
    SELECT rowid, src_node, src_port, dst_node, dst_port, priority, name, class,
           bandwidth, weight, owner_uid, owner_pid FROM flows_v1 ORDER BY rowid;
DROP TABLE flows_v1;
";

/// Page size of a new database: a release rewrites the one leaf holding its row, and
/// small pages keep that write (and the WAL) small. Rows are about 100 bytes.
const PAGE_SIZE: u32 = 1024;

impl Store {
    /// Opens (creating if needed) the database at `path`, returns the writer handle
    /// and every flow it holds, in the order they were granted.
    pub fn open(path: &Path, sync: Sync) -> Result<(Store, Vec<FlowRow>), StoreError> {
        let p = path.display().to_string();
        let sql = |source| StoreError::Sqlite {
            path: p.clone(),
            source,
        };
        let mut conn = Connection::open(path).map_err(sql)?;
        // Takes effect only on a database not yet written (before WAL mode is set).
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(sql)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        let level = match sync {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", level)
            .map_err(sql)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        match version {
            0 | 2 => conn.execute_batch(CREATE_FLOWS).map_err(sql)?,
            1 => {
                let tx = conn.transaction().map_err(sql)?;
                for step in [MOVE_V1_AWAY, CREATE_FLOWS, COPY_V1] {
                    tx.execute_batch(step).map_err(sql)?;
                }
                tx.commit().map_err(sql)?;
                tracing::info!(db = %p, "database moved to schema version 2");
            }
            v => {
                return Err(StoreError::BadRow {
                    path: p.clone(),
                    message: format!(
                        "schema version {v} is newer than this manager's (2); upgrade the manager"
                    ),
                })
            }
        }
        // Checkpoints (copying the WAL into the database, with their own flushes) run
        // on a second connection in the background, off the commit path.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(sql)?;
        let checkpointer = Connection::open(path).map_err(sql)?;
        let rows = load(&conn, &p)?;
        let (tx, rx) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("qos-store".into())
            .spawn(move || writer(conn, rx, p))
            .expect("spawn the database writer thread");
        thread::Builder::new()
            .name("qos-checkpoint".into())
            .spawn(move || checkpoints(checkpointer))
            .expect("spawn the database checkpoint thread");
        Ok((Store { tx }, rows))
    }

    /// Queues a job; its completion runs after its transaction commits.
    pub fn submit(&self, job: Job) {
        if self.tx.send(job).is_err() {
            tracing::error!("database writer is gone; stopping");
            std::process::exit(70);
        }
    }
}

fn load(conn: &Connection, path: &str) -> Result<Vec<FlowRow>, StoreError> {
    let sql = |source| StoreError::Sqlite {
        path: path.to_string(),
        source,
    };
    let mut stmt = conn
        .prepare(
            "SELECT src_node, src_port, dst_node, dst_port, priority, name, class, bandwidth, \
             weight, owner_uid, owner_pid, id FROM flows ORDER BY id",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, i64>(8)?,
                r.get::<_, i64>(9)?,
                r.get::<_, i64>(10)?,
                r.get::<_, i64>(11)?,
            ))
        })
        .map_err(sql)?;
    let mut out = Vec::new();
    for row in rows {
        let (sn, sp, dn, dp, pr, name, class, bw, w, uid, pid, id) = row.map_err(sql)?;
        let bad = |m: &str| StoreError::BadRow {
            path: path.to_string(),
            message: m.to_string(),
        };
        let port = |v: i64| u16::try_from(v).map_err(|_| bad("port out of range"));
        let class = match class.as_str() {
            "premium" => ClassSpec::Premium {
                bandwidth: u64::try_from(bw).map_err(|_| bad("bandwidth out of range"))?,
            },
            "best_effort" => ClassSpec::BestEffort {
                weight: u32::try_from(w).map_err(|_| bad("weight out of range"))?,
            },
            _ => return Err(bad("unknown class")),
        };
        out.push(FlowRow {
            id,
            spec: FlowSpec {
                src: EndpointSpec {
                    node: sn,
                    port: port(sp)?,
                },
                dst: EndpointSpec {
                    node: dn,
                    port: port(dp)?,
                },
                priority: u8::try_from(pr).map_err(|_| bad("priority out of range"))?,
            },
            name,
            class,
            owner: Owner {
                uid: u32::try_from(uid).map_err(|_| bad("uid out of range"))?,
                pid: u32::try_from(pid).map_err(|_| bad("pid out of range"))?,
            },
        });
    }
    Ok(out)
}

fn apply(tx: &rusqlite::Transaction<'_>, op: &DbOp) -> rusqlite::Result<()> {
    match op {
        DbOp::Insert(r) => {
            let (class, bw, w) = match r.class {
                ClassSpec::Premium { bandwidth } => ("premium", bandwidth as i64, 0i64),
                ClassSpec::BestEffort { weight } => ("best_effort", 0i64, weight as i64),
            };
            tx.prepare_cached(
                "INSERT OR REPLACE INTO flows (src_node, src_port, dst_node, dst_port, priority, \
                 name, class, bandwidth, weight, owner_uid, owner_pid, id) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?
            .execute(params![
                r.spec.src.node,
                r.spec.src.port,
                r.spec.dst.node,
                r.spec.dst.port,
                r.spec.priority,
                r.name,
                class,
                bw,
                w,
                r.owner.uid,
                r.owner.pid,
                r.id
            ])?;
        }
        DbOp::Delete(id, _) => {
            tx.prepare_cached("DELETE FROM flows WHERE id = ?1")?
                .execute(params![id])?;
        }
    }
    Ok(())
}

fn commit(conn: &mut Connection, jobs: &[Job]) -> rusqlite::Result<()> {
    if jobs.iter().all(|j| j.ops.is_empty()) {
        return Ok(());
    }
    let tx = conn.transaction()?;
    for j in jobs {
        for op in &j.ops {
            apply(&tx, op)?;
        }
    }
    tx.commit()
}

/// Every quarter second, a passive checkpoint: it never blocks the writer.
fn checkpoints(conn: Connection) {
    loop {
        thread::sleep(std::time::Duration::from_millis(250));
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "checkpoint failed");
        }
    }
}

fn writer(mut conn: Connection, rx: mpsc::Receiver<Job>, path: String) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        if let Err(e) = commit(&mut conn, &batch) {
            // Memory is ahead of disk now: stop, the restart recovers from disk alone.
            tracing::error!(database = %path, error = %e, "commit failed; stopping");
            eprintln!("error: database {path}: commit failed: {e}");
            std::process::exit(70);
        }
        for j in batch.drain(..) {
            (j.done)();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, port: u16) -> FlowRow {
        FlowRow {
            id,
            spec: FlowSpec {
                src: EndpointSpec {
                    node: "n0".into(),
                    port,
                },
                dst: EndpointSpec {
                    node: "n1".into(),
                    port: 0,
                },
                priority: 0,
            },
            name: format!("f{port}"),
            class: ClassSpec::Premium { bandwidth: 1_000 },
            owner: Owner { uid: 7, pid: 9 },
        }
    }

    fn write(store: &Store, ops: Vec<DbOp>) {
        let (tx, rx) = mpsc::channel();
        store.submit(Job {
            ops,
            done: Box::new(move || {
                let _ = tx.send(());
            }),
        });
        rx.recv().unwrap();
    }

    #[test]
    fn rows_come_back_in_grant_order_with_their_ids_after_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let (store, rows) = Store::open(&db, Sync::Normal).unwrap();
        assert!(rows.is_empty());
        write(
            &store,
            (1..=5).map(|i| DbOp::Insert(row(i, i as u16))).collect(),
        );
        write(
            &store,
            vec![
                DbOp::Delete(2, row(2, 2).spec),
                DbOp::Delete(4, row(4, 4).spec),
            ],
        );
        drop(store);
        let (_, rows) = Store::open(&db, Sync::Normal).unwrap();
        assert_eq!(rows, vec![row(1, 1), row(3, 3), row(5, 5)]);
    }

    #[test]
    fn a_version_1_database_moves_to_version_2_keeping_every_row_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("old.db");
        {
            let c = Connection::open(&db).unwrap();
            c.execute_batch(
                "CREATE TABLE flows (src_node TEXT NOT NULL, src_port INTEGER NOT NULL,
                   dst_node TEXT NOT NULL, dst_port INTEGER NOT NULL, priority INTEGER NOT NULL,
                   name TEXT NOT NULL, class TEXT NOT NULL, bandwidth INTEGER NOT NULL,
                   weight INTEGER NOT NULL, owner_uid INTEGER NOT NULL, owner_pid INTEGER NOT NULL,
                   PRIMARY KEY (src_node, src_port, dst_node, dst_port, priority));
                 PRAGMA user_version = 1;
                 INSERT INTO flows VALUES ('n0', 3, 'n1', 0, 0, 'f3', 'premium', 1000, 0, 7, 9);
                 INSERT INTO flows VALUES ('n0', 1, 'n1', 0, 0, 'f1', 'premium', 1000, 0, 7, 9);",
            )
            .unwrap();
        }
        let (_, rows) = Store::open(&db, Sync::Normal).unwrap();
        assert_eq!(rows, vec![row(1, 3), row(2, 1)]);
        let c = Connection::open(&db).unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 2);
    }

    #[test]
    fn a_newer_schema_is_refused_with_the_versions_named() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("new.db");
        Connection::open(&db)
            .unwrap()
            .execute_batch("PRAGMA user_version = 3;")
            .unwrap();
        let e = Store::open(&db, Sync::Normal).err().unwrap().to_string();
        assert!(e.contains("schema version 3") && e.contains("(2)"), "{e}");
    }
}
