//! The embedded backend of the master's store (the default, one master, no server):
//! the granted flows in an SQLite database, written with *group commit*.
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
//!
//! Damage is looked for on every open: SQLite's integrity check,
//! a checksum on every row ([`schema`]), and the [`witness`] file that says which
//! transaction the database must at least hold. An empty file where a database was,
//! a truncated WAL, an older copy or a changed row stops the start with a one-line
//! report instead of serving fewer or different grants. The database and its witness
//! are created mode 0600: they name users and processes. `docs/protocol.md`
//! ("Durability") says what cannot be detected.

use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::api::{Job, Restored, Store, StoreError};
use super::check::{self, Account};
use super::{schema, witness};
use rusqlite::{params, Connection, OpenFlags};

use crate::manager::state::DbOp;

/// How far a commit goes before a grant is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
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

/// Handle to the writer thread. Dropping it lets the writer finish the jobs queued,
/// stops both threads and waits for them, so the database is closed (and its WAL
/// checkpointed) when the drop returns.
pub struct SqliteStore {
    tx: Option<mpsc::Sender<Job>>,
    /// Dropped to stop the checkpoint thread.
    stop: Option<mpsc::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.tx = None;
        self.stop = None;
        let me = thread::current().id();
        for t in self.threads.drain(..) {
            // Never wait for the thread this drop runs on (a completion dropping the
            // last handle).
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

/// Largest number of jobs in one transaction.
const MAX_BATCH: usize = 4096;

/// Page size of a new database: a release rewrites the one leaf holding its row, and
/// small pages keep that write (and the WAL) small. Rows are about 100 bytes.
const PAGE_SIZE: u32 = 1024;

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, checks it for damage, and
    /// returns the writer handle and what the database holds.
    pub fn open(path: &Path, sync: Sync) -> Result<(SqliteStore, Restored), StoreError> {
        SqliteStore::open_with(path, sync, true)
    }

    /// [`Store::open`], with background checkpoints or without (tests that need the
    /// WAL left as a crash would leave it).
    pub(crate) fn open_with(
        path: &Path,
        sync: Sync,
        background_checkpoints: bool,
    ) -> Result<(SqliteStore, Restored), StoreError> {
        let p = path.display().to_string();
        let damaged = |message: String| StoreError::Damaged {
            path: p.clone(),
            message,
        };
        let io = |file: &Path| {
            let file = file.display().to_string();
            move |source| StoreError::Io { path: file, source }
        };
        let wpath = witness::path_for(path);
        let found = witness::read(&wpath).map_err(io(&wpath))?;
        let recorded = match found {
            witness::Found::Record(w) => format!(
                "{} records a database holding {} flows at transaction {}",
                wpath.display(),
                w.rows,
                w.seq
            ),
            _ => format!("{} records a database here", wpath.display()),
        };
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if found != witness::Found::Absent {
                    return Err(damaged(format!(
                        "the file is missing, but {recorded}: refusing to start with no grants; \
                         restore the database, or move the witness away to start empty"
                    )));
                }
                create(path).map_err(|e| e.into_store_error(&p))?;
            }
            Err(e) => return Err(io(path)(e)),
            Ok(m) if m.len() == 0 => {
                let why = if found == witness::Found::Absent {
                    "the manager never leaves an empty database file".to_string()
                } else {
                    recorded
                };
                return Err(damaged(format!(
                    "the file is empty (0 bytes) where a database was ({why}): refusing to \
                     start with no grants; restore the database, or remove the file{} to start empty",
                    if found == witness::Found::Absent {
                        String::new()
                    } else {
                        " and its witness".to_string()
                    }
                )));
            }
            Ok(m) => {
                if m.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(db = %p, mode = format!("{:o}", m.permissions().mode() & 0o777),
                        "the database is readable by other users; it names users and processes (chmod 600)");
                }
            }
        }
        let sql = |source| StoreError::Sqlite {
            path: p.clone(),
            source,
        };
        // Never create here: the file was checked above and must not be replaced.
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        let not_db = |e: rusqlite::Error| {
            damaged(format!(
                "cannot be read as an SQLite database ({e}): the file is damaged"
            ))
        };
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(not_db)?;
        let level = match sync {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", level)
            .map_err(sql)?;
        check::integrity(&conn).map_err(damaged)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(not_db)?;
        match version {
            schema::VERSION => {}
            1 | 2 => {
                let id = format!("{:032x}", rand::random::<u128>());
                let tx = conn.transaction().map_err(sql)?;
                schema::upgrade(&tx, version, &id)
                    .map_err(|m| damaged(format!("moving schema version {version} to 3: {m}")))?;
                tx.commit().map_err(sql)?;
                tracing::info!(db = %p, from = version, "database moved to schema version 3");
            }
            0 => {
                return Err(damaged(
                    "holds no clusterqos tables (schema version 0): not a manager database".into(),
                ))
            }
            v => {
                return Err(StoreError::BadRow {
                    path: p.clone(),
                    message: format!(
                        "schema version {v} is newer than this manager's ({}); upgrade the manager",
                        schema::VERSION
                    ),
                })
            }
        }
        // Checkpoints (copying the WAL into the database, with their own flushes) run
        // on a second connection in the background, off the commit path.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(sql)?;
        conn.execute_batch(schema::JOBS).map_err(sql)?;
        let (restored, account) = check::load(&conn).map_err(damaged)?;
        check::compare(&account, found, &wpath).map_err(damaged)?;
        if found == witness::Found::Absent && !restored.rows.is_empty() {
            tracing::warn!(db = %p, "no witness file beside the database; starting one");
        }
        let witness =
            witness::Witness::open(&wpath, account.record(), found).map_err(io(&wpath))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let mut threads = Vec::new();
        // The checkpointer's connection closes first, so the writer's is the last:
        // closing it checkpoints the WAL into the database file.
        if background_checkpoints {
            let checkpointer = Connection::open(path).map_err(sql_at(path))?;
            threads.push(
                thread::Builder::new()
                    .name("qos-checkpoint".into())
                    .spawn(move || checkpoints(checkpointer, stopped))
                    .expect("spawn the database checkpoint thread"),
            );
        }
        let (tx, rx) = mpsc::channel::<Job>();
        threads.push(
            thread::Builder::new()
                .name("qos-store".into())
                .spawn(move || writer(conn, rx, p, account, witness))
                .expect("spawn the database writer thread"),
        );
        Ok((
            SqliteStore {
                tx: Some(tx),
                stop: Some(stop),
                threads,
            },
            restored,
        ))
    }
}

impl Store for SqliteStore {
    /// Queues a job; its completion runs after its transaction commits.
    fn submit(&self, job: Job) {
        let sent = self.tx.as_ref().map(|tx| tx.send(job));
        if !matches!(sent, Some(Ok(()))) {
            tracing::error!("database writer is gone; stopping");
            std::process::exit(70);
        }
    }
}

fn sql_at(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError {
    let p = path.display().to_string();
    move |source| StoreError::Sqlite {
        path: p.clone(),
        source,
    }
}

/// Why a new database could not be made.
enum CreateError {
    Io(PathBuf, std::io::Error),
    Sqlite(rusqlite::Error),
}

impl CreateError {
    fn into_store_error(self, db: &str) -> StoreError {
        match self {
            CreateError::Io(p, source) => StoreError::Io {
                path: p.display().to_string(),
                source,
            },
            CreateError::Sqlite(source) => StoreError::Sqlite {
                path: db.to_string(),
                source,
            },
        }
    }
}

/// Makes a new, empty database at `path` (mode 0600): built under a temporary name,
/// checkpointed into the main file and flushed, then renamed into place, so a crash
/// never leaves a half-made or empty file under the database's name.
fn create(path: &Path) -> Result<(), CreateError> {
    let tmp = with_suffix(path, ".new");
    for p in [
        tmp.clone(),
        with_suffix(&tmp, "-wal"),
        with_suffix(&tmp, "-shm"),
    ] {
        let _ = std::fs::remove_file(p);
    }
    let ioe = |p: &Path| {
        let p = p.to_path_buf();
        move |e| CreateError::Io(p, e)
    };
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(ioe(&tmp))?;
    let conn = Connection::open(&tmp).map_err(CreateError::Sqlite)?;
    let id = format!("{:032x}", rand::random::<u128>());
    (|| {
        conn.pragma_update(None, "page_size", PAGE_SIZE)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(schema::CREATE)?;
        conn.execute(
            "INSERT INTO meta (id, db_id, commit_seq) VALUES (1, ?1, 0)",
            params![id],
        )?;
        conn.pragma_update(None, "user_version", schema::VERSION)?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
    })()
    .map_err(CreateError::Sqlite)?;
    conn.close().map_err(|(_, e)| CreateError::Sqlite(e))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(ioe(&tmp))?;
    std::fs::rename(&tmp, path).map_err(ioe(path))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    tracing::info!(db = %path.display(), "new database");
    Ok(())
}

/// Writes one op; returns the change to the account's (rows, digest).
fn apply(tx: &rusqlite::Transaction<'_>, op: &DbOp) -> rusqlite::Result<(i64, u64)> {
    match op {
        DbOp::Insert(r) => {
            let (class, bw, w) = schema::class_columns(&r.class);
            tx.prepare_cached(
                "INSERT INTO flows (src_node, src_port, dst_node, dst_port, priority, \
                 name, class, bandwidth, weight, owner_uid, owner_pid, id, checksum) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
                r.id,
                schema::flow_checksum(r)
            ])?;
            Ok((1, schema::id_digest(r.id)))
        }
        DbOp::Delete(id, _) => {
            let n = tx
                .prepare_cached("DELETE FROM flows WHERE id = ?1")?
                .execute(params![id])?;
            if n == 1 {
                Ok((-1, schema::id_digest(*id).wrapping_neg()))
            } else {
                Ok((0, 0))
            }
        }
        DbOp::Holder(node, instance) => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO agents (node, instance, checksum) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![
                node,
                *instance as i64,
                schema::holder_checksum(node, *instance)
            ])?;
            Ok((0, 0))
        }
        DbOp::JobPut(j) => {
            let body = serde_json::to_string(j).expect("job records serialize");
            tx.prepare_cached(
                "INSERT OR REPLACE INTO jobs (id, body, checksum) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![j.id, body, schema::job_checksum(&j.id, &body)])?;
            Ok((0, 0))
        }
        DbOp::JobDelete(id) => {
            tx.prepare_cached("DELETE FROM jobs WHERE id = ?1")?
                .execute(params![id])?;
            Ok((0, 0))
        }
    }
}

/// One transaction for `jobs`; the account moves on only if it commits.
fn commit(conn: &mut Connection, jobs: &[Job], account: &mut Account) -> rusqlite::Result<bool> {
    if jobs.iter().all(|j| j.ops.is_empty()) {
        return Ok(false);
    }
    let tx = conn.transaction()?;
    let (mut rows, mut digest) = (account.rows as i64, account.digest);
    for j in jobs {
        for op in &j.ops {
            let (dr, dd) = apply(&tx, op)?;
            rows += dr;
            digest = digest.wrapping_add(dd);
        }
    }
    let seq = account.seq + 1;
    tx.prepare_cached("UPDATE meta SET commit_seq = ?1 WHERE id = 1")?
        .execute(params![seq as i64])?;
    tx.commit()?;
    account.seq = seq;
    account.rows = rows as u64;
    account.digest = digest;
    Ok(true)
}

/// Every quarter second, a passive checkpoint: it never blocks the writer. Stops when
/// the last [`Store`] handle goes.
fn checkpoints(conn: Connection, stop: mpsc::Receiver<()>) {
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(Duration::from_millis(250)) {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "checkpoint failed");
        }
    }
}

fn writer(
    mut conn: Connection,
    rx: mpsc::Receiver<Job>,
    path: String,
    mut account: Account,
    witness: witness::Witness,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    let mut witness_ok = true;
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        match commit(&mut conn, &batch, &mut account) {
            Ok(false) => {}
            Ok(true) => {
                // Before the acknowledgements: an acknowledged grant is always witnessed.
                if let Err(e) = witness.record(account.record()) {
                    if std::mem::take(&mut witness_ok) {
                        tracing::warn!(database = %path, error = %e, "cannot write the witness file");
                    }
                }
            }
            Err(e) => {
                // Memory is ahead of disk now: stop, the restart recovers from disk alone.
                tracing::error!(database = %path, error = %e, "commit failed; stopping");
                eprintln!("error: database {path}: commit failed: {e}");
                std::process::exit(70);
            }
        }
        for j in batch.drain(..) {
            (j.done)();
        }
    }
}

#[cfg(test)]
mod tests;
