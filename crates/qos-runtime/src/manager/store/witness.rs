//! The witness file beside the database (`<db>.witness`): after
//! every commit the writer records there which database it wrote (its identity), the
//! number of the transaction, how many flow rows the table holds and a digest of
//! their ids. On start-up the database must agree with it; otherwise something
//! outside the master took data away — a database file replaced by an empty one, a
//! WAL truncated after a crash, an older copy put back — and the master refuses to
//! start rather than serve fewer grants silently.
//!
//! Writing it costs one small `pwrite` per group commit and no flush: a witness that
//! lags the database (a power failure before the page cache reached the disk) only
//! weakens the check, it never raises a false alarm. Two slots are written in turn,
//! each with its own checksum, so a torn write leaves the other slot to read.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"CQWITN01";
const SLOT: usize = 64;

/// One record of the witness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The database's identity (`meta.db_id`, 32 hex digits, as bytes).
    pub db_id: [u8; 16],
    /// The last transaction committed (`meta.commit_seq`).
    pub seq: u64,
    /// Flow rows after it.
    pub rows: u64,
    /// Sum (wrapping) of [`super::schema::id_digest`] over those rows' ids.
    pub digest: u64,
}

fn check(bytes: &[u8]) -> [u8; 8] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut b = [0u8; 8];
    b.copy_from_slice(&d.as_ref()[..8]);
    b
}

impl Record {
    fn encode(&self) -> [u8; SLOT] {
        let mut b = [0u8; SLOT];
        b[..8].copy_from_slice(MAGIC);
        b[8..24].copy_from_slice(&self.db_id);
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.rows.to_le_bytes());
        b[40..48].copy_from_slice(&self.digest.to_le_bytes());
        let c = check(&b[..48]);
        b[48..56].copy_from_slice(&c);
        b
    }

    fn decode(b: &[u8]) -> Option<Record> {
        if b.len() < 56 || &b[..8] != MAGIC || check(&b[..48])[..] != b[48..56] {
            return None;
        }
        let u = |r: std::ops::Range<usize>| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[r]);
            u64::from_le_bytes(x)
        };
        let mut db_id = [0u8; 16];
        db_id.copy_from_slice(&b[8..24]);
        Some(Record {
            db_id,
            seq: u(24..32),
            rows: u(32..40),
            digest: u(40..48),
        })
    }
}

/// The witness's path for database `db`.
pub fn path_for(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_os_string();
    p.push(".witness");
    PathBuf::from(p)
}

/// What the witness file at `path` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// No file.
    Absent,
    /// A file, but neither slot holds a valid record.
    Unreadable,
    /// The newest valid record.
    Record(Record),
}

/// Reads the witness at `path`.
pub fn read(path: &Path) -> io::Result<Found> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Absent),
        Err(e) => return Err(e),
    };
    let best = bytes
        .chunks(SLOT)
        .take(2)
        .filter_map(Record::decode)
        .max_by_key(|r| r.seq);
    Ok(best.map_or(Found::Unreadable, Found::Record))
}

/// The writer's handle on the witness file.
pub struct Witness {
    file: File,
}

impl Witness {
    /// The witness at `path` (created mode 0600), made to hold `r` in both slots and
    /// flushed to the device — unless `found` (what [`read`] said) is `r` already.
    pub fn open(path: &Path, r: Record, found: Found) -> io::Result<Witness> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let both = file.metadata()?.len() == 2 * SLOT as u64;
        if found != Found::Record(r) || !both {
            let b = r.encode();
            file.set_len(0)?;
            file.write_all_at(&b, 0)?;
            file.write_all_at(&b, SLOT as u64)?;
            file.sync_all()?;
        }
        Ok(Witness { file })
    }

    /// Records `r` (no flush; see the module documentation).
    pub fn record(&self, r: Record) -> io::Result<()> {
        self.file
            .write_all_at(&r.encode(), (r.seq % 2) * SLOT as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_intact_slot_is_read_and_a_torn_one_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w");
        assert_eq!(read(&p).unwrap(), Found::Absent);
        let r = |seq| Record {
            db_id: [7; 16],
            seq,
            rows: seq * 2,
            digest: seq * 3,
        };
        let w = Witness::open(&p, r(4), Found::Absent).unwrap();
        w.record(r(5)).unwrap();
        assert_eq!(read(&p).unwrap(), Found::Record(r(5)));
        // Slot 1 (seq 5) torn: slot 0 still says 4.
        let mut b = std::fs::read(&p).unwrap();
        b[SLOT + 30] ^= 1;
        std::fs::write(&p, &b).unwrap();
        assert_eq!(read(&p).unwrap(), Found::Record(r(4)));
        b[30] ^= 1;
        std::fs::write(&p, &b).unwrap();
        assert_eq!(read(&p).unwrap(), Found::Unreadable);
    }
}
