//! The contract every backend of [`Store`] keeps, written once and run by the SQLite tests
//! and by the etcd tests against a real etcd.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::api::{Job, Restored, Store};
use crate::manager::state::{DbOp, FlowRow};
use crate::protocol::{ClassSpec, EndpointSpec, FlowSpec, Owner};

/// A backend under test.
pub(crate) trait Harness {
    /// Opens the store (for etcd, as the leader of a new term; the previous term's
    /// lease is given up first): the writer and what the store holds, or the
    /// refusal's message.
    fn open(&mut self) -> Result<(Box<dyn Store>, Restored), String>;
    /// Changes flow `id`'s stored bandwidth behind the manager's back.
    fn tamper_flow(&mut self, id: i64);
    /// Deletes flow `id` behind the manager's back.
    fn delete_flow(&mut self, id: i64);
}

pub(crate) fn row(id: i64) -> FlowRow {
    FlowRow {
        id,
        spec: FlowSpec {
            src: EndpointSpec {
                node: "n0".into(),
                port: id as u16,
            },
            dst: EndpointSpec {
                node: "n1".into(),
                port: 0,
            },
            priority: 0,
        },
        name: format!("flow-{id}"),
        class: if id % 3 == 0 {
            ClassSpec::BestEffort { weight: 2 }
        } else {
            ClassSpec::Premium {
                bandwidth: 1_000 * id as u64,
            }
        },
        owner: Owner { uid: 7, pid: 9 },
    }
}

pub(crate) fn delete(id: i64) -> DbOp {
    DbOp::Delete(id, row(id).spec)
}

/// Submits `ops` and waits for the completion.
pub(crate) fn write(store: &dyn Store, ops: Vec<DbOp>) {
    let (tx, rx) = mpsc::channel();
    store.submit(Job {
        ops,
        done: Box::new(move || {
            let _ = tx.send(());
        }),
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the commit completed");
}

pub(crate) fn rows_and_holders_come_back_as_committed(h: &mut impl Harness) {
    let (s, r) = h.open().unwrap();
    assert_eq!(r, Restored::default(), "a new store is empty");
    for i in 1..=5 {
        write(&*s, vec![DbOp::Insert(row(i))]);
    }
    write(&*s, vec![delete(2)]);
    write(&*s, vec![DbOp::Holder("n0".into(), 7)]);
    write(
        &*s,
        vec![DbOp::Holder("n0".into(), 8), DbOp::Holder("n1".into(), 9)],
    );
    drop(s);
    let (_s, r) = h.open().unwrap();
    assert_eq!(r.rows, [1, 3, 4, 5].map(row).to_vec());
    let mut holders = r.holders;
    holders.sort();
    assert_eq!(holders, [("n0".to_string(), 8), ("n1".to_string(), 9)]);
}

pub(crate) fn completions_run_once_each_in_submission_order(h: &mut impl Harness) {
    let (s, _) = h.open().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let n = 300;
    for i in 0..n {
        // Every third job releases the flow granted two jobs before it.
        let ops = if i % 3 == 2 {
            vec![delete(i - 1)]
        } else {
            vec![DbOp::Insert(row(i + 1))]
        };
        let (order, tx) = (order.clone(), tx.clone());
        s.submit(Job {
            ops,
            done: Box::new(move || {
                order.lock().unwrap().push(i);
                let _ = tx.send(());
            }),
        });
    }
    for _ in 0..n {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("every completion ran");
    }
    assert_eq!(*order.lock().unwrap(), (0..n).collect::<Vec<_>>());
    drop(s);
    let (_s, r) = h.open().unwrap();
    let want: Vec<FlowRow> = (0..n).filter(|i| i % 3 == 1).map(|i| row(i + 1)).collect();
    assert_eq!(r.rows, want);
}

pub(crate) fn a_changed_value_is_refused(h: &mut impl Harness) {
    let (s, _) = h.open().unwrap();
    for i in 1..=3 {
        write(&*s, vec![DbOp::Insert(row(i))]);
    }
    drop(s);
    h.tamper_flow(2);
    let e = h.open().err().expect("refused");
    assert!(e.contains("fails its checksum"), "{e}");
}

pub(crate) fn a_flow_deleted_outside_is_refused(h: &mut impl Harness) {
    let (s, _) = h.open().unwrap();
    for i in 1..=3 {
        write(&*s, vec![DbOp::Insert(row(i))]);
    }
    drop(s);
    h.delete_flow(2);
    let e = h.open().err().expect("refused");
    assert!(e.contains("holds 2 flows where transaction"), "{e}");
}
