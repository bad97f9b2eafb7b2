//! Tests of the durable store: rows come back as written, old schemas move forward,
//! and damage done outside the manager stops the start with a
//! clear report instead of serving fewer or different grants.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::manager::state::FlowRow;
use crate::manager::store::api::Store;
use crate::protocol::{ClassSpec, EndpointSpec, FlowSpec, Owner};

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
        name: format!("flow-number-{port:05}"),
        class: ClassSpec::Premium { bandwidth: 1_000 },
        owner: Owner { uid: 7, pid: 9 },
    }
}

fn write(store: &SqliteStore, ops: Vec<DbOp>) {
    let (tx, rx) = mpsc::channel();
    store.submit(Job {
        ops,
        done: Box::new(move || {
            let _ = tx.send(());
        }),
    });
    rx.recv().unwrap();
}

fn rows_of(db: &Path) -> Result<Vec<FlowRow>, String> {
    SqliteStore::open(db, Sync::Normal)
        .map(|(_, r)| r.rows)
        .map_err(|e| e.to_string())
}

/// A database with rows 1..=n granted one transaction each, closed cleanly.
fn filled(dir: &Path, n: i64) -> PathBuf {
    let db = dir.join("m.db");
    let (store, _) = SqliteStore::open(&db, Sync::Normal).unwrap();
    for i in 1..=n {
        write(&store, vec![DbOp::Insert(row(i, i as u16))]);
    }
    drop(store);
    db
}

#[test]
fn rows_come_back_in_grant_order_with_their_ids_after_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let (store, restored) = SqliteStore::open(&db, Sync::Normal).unwrap();
    assert!(restored.rows.is_empty() && restored.holders.is_empty());
    write(
        &store,
        (1..=5).map(|i| DbOp::Insert(row(i, i as u16))).collect(),
    );
    write(
        &store,
        vec![
            DbOp::Delete(2, row(2, 2).spec),
            DbOp::Delete(4, row(4, 4).spec),
            DbOp::Holder("n0".into(), 0xfeed),
            DbOp::Holder("n1".into(), 1),
            DbOp::Holder("n0".into(), u64::MAX),
        ],
    );
    drop(store);
    let (_, restored) = SqliteStore::open(&db, Sync::Normal).unwrap();
    assert_eq!(restored.rows, vec![row(1, 1), row(3, 3), row(5, 5)]);
    assert_eq!(
        restored.holders,
        vec![("n0".to_string(), u64::MAX), ("n1".to_string(), 1)]
    );
}

#[test]
fn the_database_and_its_witness_are_created_readable_by_their_owner_only() {
    // The file names users and processes.
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path(), 1);
    for f in [db.clone(), witness::path_for(&db)] {
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
}

#[test]
fn a_version_1_database_moves_to_version_3_keeping_every_row_in_order() {
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
             INSERT INTO flows VALUES ('n0', 3, 'n1', 0, 0, 'flow-number-00003', 'premium', 1000, 0, 7, 9);
             INSERT INTO flows VALUES ('n0', 1, 'n1', 0, 0, 'flow-number-00001', 'premium', 1000, 0, 7, 9);",
        )
        .unwrap();
    }
    assert_eq!(rows_of(&db).unwrap(), vec![row(1, 3), row(2, 1)]);
    let c = Connection::open(&db).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 3);
    // The moved rows carry checksums: a later change is caught.
    c.execute("UPDATE flows SET bandwidth = 9999 WHERE id = 2", [])
        .unwrap();
    drop(c);
    let e = rows_of(&db).unwrap_err();
    assert!(e.contains("row 2 fails its checksum"), "{e}");
}

#[test]
fn a_version_2_database_gains_checksums_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v2.db");
    {
        let c = Connection::open(&db).unwrap();
        c.execute_batch(
            "CREATE TABLE flows (id INTEGER PRIMARY KEY, src_node TEXT NOT NULL,
               src_port INTEGER NOT NULL, dst_node TEXT NOT NULL, dst_port INTEGER NOT NULL,
               priority INTEGER NOT NULL, name TEXT NOT NULL, class TEXT NOT NULL,
               bandwidth INTEGER NOT NULL, weight INTEGER NOT NULL,
               owner_uid INTEGER NOT NULL, owner_pid INTEGER NOT NULL);
             PRAGMA user_version = 2;
             INSERT INTO flows VALUES (4, 'n0', 4, 'n1', 0, 0, 'flow-number-00004', 'premium', 1000, 0, 7, 9);",
        )
        .unwrap();
    }
    assert_eq!(rows_of(&db).unwrap(), vec![row(4, 4)]);
    assert_eq!(rows_of(&db).unwrap(), vec![row(4, 4)]);
}

#[test]
fn a_newer_schema_is_refused_with_the_versions_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE x (y); PRAGMA user_version = 4;")
        .unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(e.contains("schema version 4") && e.contains("(3)"), "{e}");
}

#[test]
fn an_empty_file_where_the_database_was_is_refused() {
    // Regression: a 0-byte file in place of the database started empty without
    // a word, every grant gone.
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path(), 3);
    std::fs::write(&db, b"").unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(
        e.contains("empty (0 bytes)") && e.contains("3 flows at transaction 3"),
        "{e}"
    );
    // Refused also with the witness gone: the manager never leaves an empty file.
    std::fs::remove_file(witness::path_for(&db)).unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(e.contains("never leaves an empty database file"), "{e}");
    // The file gone too, it is a new start.
    std::fs::remove_file(&db).unwrap();
    assert_eq!(rows_of(&db).unwrap(), vec![]);
}

#[test]
fn a_missing_database_with_a_witness_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path(), 2);
    std::fs::remove_file(&db).unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(
        e.contains("the file is missing") && e.contains("2 flows"),
        "{e}"
    );
    assert!(!db.exists(), "nothing was created in its place");
}

#[test]
fn a_wal_truncated_after_a_crash_is_reported_with_the_missing_transactions() {
    // Regression: a WAL truncated after kill -9 served fewer grants silently.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    let (store, _) = SqliteStore::open_with(&db, Sync::Normal, false).unwrap();
    for i in 1..=5 {
        write(&store, vec![DbOp::Insert(row(i, i as u16))]);
    }
    // What a kill -9 leaves on disk: the database, its WAL (no checkpoint ran) and
    // the witness, taken while the master is idle.
    let files = ["m.db", "m.db-wal", "m.db.witness"];
    let image: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(dir.path().join(f)).unwrap())
        .collect();
    drop(store);
    let crash = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for (f, bytes) in files.iter().zip(&image) {
            std::fs::write(d.join(f), bytes).unwrap();
        }
        d
    };
    assert_eq!(
        rows_of(&crash("whole").join("m.db")).unwrap().len(),
        5,
        "the crash image is whole"
    );
    let cut = crash("cut");
    let db = cut.join("m.db");
    // Cut the WAL's last frame (a 24-byte header and a 1 KiB page): the last commit.
    let wal = cut.join("m.db-wal");
    let len = std::fs::metadata(&wal).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - (24 + PAGE_SIZE as u64))
        .unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(
        e.contains("the database ends at transaction 4 (4 flows), but transaction 5 (5 flows)")
            && e.contains("1 transactions are missing"),
        "{e}"
    );
}

#[test]
fn an_older_copy_put_back_or_another_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path(), 2);
    let old = dir.path().join("old.db");
    std::fs::copy(&db, &old).unwrap();
    {
        let (store, _) = SqliteStore::open(&db, Sync::Normal).unwrap();
        write(&store, vec![DbOp::Insert(row(3, 3))]);
    }
    std::fs::copy(&old, &db).unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(e.contains("1 transactions are missing"), "{e}");
    // A different database under the same name.
    let other = tempfile::tempdir().unwrap();
    let fresh = filled(other.path(), 1);
    std::fs::copy(&fresh, &db).unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(e.contains("the file was replaced"), "{e}");
    // The operator accepts it by moving the witness away.
    std::fs::remove_file(witness::path_for(&db)).unwrap();
    assert_eq!(rows_of(&db).unwrap(), vec![row(1, 1)]);
}

#[test]
fn single_bit_flips_never_change_or_drop_a_grant_silently() {
    // Regression: some single bit flips changed or dropped rows. Every flip
    // tried here must either be reported or leave exactly the rows written.
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path(), 12);
    let want = rows_of(&db).unwrap();
    let pristine = std::fs::read(&db).unwrap();
    let witness = std::fs::read(witness::path_for(&db)).unwrap();
    let (mut reported, mut harmless) = (0, 0);
    // Every byte of the first two pages (header, schema) and of a data page, and a
    // spread over the rest, one bit each.
    let page = PAGE_SIZE as usize;
    let positions = (0..pristine.len()).filter(|&i| i < 2 * page || i % 3 == 0);
    for i in positions {
        let mut bytes = pristine.clone();
        bytes[i] ^= 1 << (i % 8);
        std::fs::write(&db, &bytes).unwrap();
        std::fs::write(witness::path_for(&db), &witness).unwrap();
        for f in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(with_suffix(&db, f));
        }
        match rows_of(&db) {
            Err(_) => reported += 1,
            Ok(rows) => {
                assert_eq!(rows, want, "a flip of byte {i} changed the rows silently");
                harmless += 1;
            }
        }
    }
    eprintln!("{reported} flips reported, {harmless} harmless");
    assert!(reported > 0 && harmless > 0, "{reported} {harmless}");
}

#[test]
fn a_changed_row_is_named_by_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path(), 4);
    let mut bytes = std::fs::read(&db).unwrap();
    let at = bytes
        .windows(17)
        .position(|w| w == b"flow-number-00003")
        .unwrap();
    bytes[at + 16] ^= 0x01; // "...3" becomes "...2"
    std::fs::write(&db, &bytes).unwrap();
    let e = rows_of(&db).unwrap_err();
    assert!(
        e.contains("row 3 fails its checksum") && e.contains("flow-number-00002"),
        "{e}"
    );
}

/// The SQLite backend under the store contract ([`super::super::contract`]).
struct Sqlite {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

impl Sqlite {
    fn new() -> Sqlite {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("contract.db");
        Sqlite { _dir: dir, db }
    }
}

impl super::super::contract::Harness for Sqlite {
    fn open(&mut self) -> Result<(Box<dyn Store>, Restored), String> {
        SqliteStore::open(&self.db, Sync::Normal)
            .map(|(s, r)| (Box::new(s) as Box<dyn Store>, r))
            .map_err(|e| e.to_string())
    }

    fn tamper_flow(&mut self, id: i64) {
        let c = Connection::open(&self.db).unwrap();
        c.execute("UPDATE flows SET bandwidth = 999999 WHERE id = ?1", [id])
            .unwrap();
    }

    fn delete_flow(&mut self, id: i64) {
        let c = Connection::open(&self.db).unwrap();
        c.execute("DELETE FROM flows WHERE id = ?1", [id]).unwrap();
    }
}

mod contract {
    use super::super::super::contract as c;
    use super::Sqlite;

    #[test]
    fn rows_and_holders_come_back_as_committed() {
        c::rows_and_holders_come_back_as_committed(&mut Sqlite::new());
    }

    #[test]
    fn completions_run_once_each_in_submission_order() {
        c::completions_run_once_each_in_submission_order(&mut Sqlite::new());
    }

    #[test]
    fn a_changed_value_is_refused() {
        c::a_changed_value_is_refused(&mut Sqlite::new());
    }

    #[test]
    fn a_flow_deleted_outside_is_refused() {
        c::a_flow_deleted_outside_is_refused(&mut Sqlite::new());
    }
}
