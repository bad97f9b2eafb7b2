//! How granted flows lie in etcd's keys: one key per flow, or grouped by the
//! transaction that granted them.
//!
//! etcd does work per key written (a revision in its index and its database, on
//! every member), so with `FlowKeys::Grouped` the grants of one transaction go into
//! one key, `flows/<id of its first grant>`, holding their values as a JSON array (at
//! most [`GROUP_MAX`]); releasing a flow rewrites its group's key without it, or
//! deletes the key with the group's last flow. With `FlowKeys::PerFlow` (the
//! default) every grant is a key of its own, holding its value alone, and a release
//! deletes it. Measured on one machine, grouping cut etcd's CPU per grant by about
//! a seventh and raised it per release by about a third (a rewrite carries the
//! flows left), hence the default. A store written either way opens either way.
//!
//! The writer keeps the layout in memory ([`Groups`]): which key each flow is in and,
//! for keys of several flows, their values, so a release rewrites a key without
//! reading it. It is built from what the term's load read, and moves on as each
//! transaction is made (a transaction that does not commit ends the term, and the
//! layout with it).

use std::collections::{BTreeSet, HashMap};

use super::codec;
use crate::manager::state::FlowRow;

/// Most flows one key holds: a transaction granting more starts another key. It
/// bounds what a release rewrites: a transaction of 127 releases, each from another
/// full group, rewrites 127 × 16 flows of at most ~350 bytes (names of 64), ~0.7 MB,
/// within etcd's request limit (`--max-request-bytes`, 1.5 MiB by default).
pub(super) const GROUP_MAX: usize = 16;

/// A flow operation of one transaction, in decision order.
pub(super) enum FlowOp<'a> {
    /// Granted.
    Insert(&'a FlowRow),
    /// Released, by id.
    Delete(i64),
}

/// A write to one group's key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum KeyOp {
    /// The group (by its key's id) now holds these flows (its value).
    Put(i64, Vec<u8>),
    /// The group's last flow was released: delete its key (which must exist).
    Delete(i64),
}

/// The groups of the store's flows, as the transactions made so far leave them.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// Each grant a group of its own (one key per flow: `FlowKeys::PerFlow`).
    per_flow: bool,
    /// Each group's flows (id and encoded value, in grant order), by the id its key
    /// names.
    groups: HashMap<i64, Vec<(i64, Vec<u8>)>>,
    /// The group each flow is in.
    of: HashMap<i64, i64>,
}

impl Groups {
    /// The layout a load found: each group's key id and its flows; new grants
    /// grouped per transaction, or `per_flow`.
    pub fn new(loaded: Vec<(i64, Vec<FlowRow>)>, per_flow: bool) -> Groups {
        let mut g = Groups {
            per_flow,
            ..Groups::default()
        };
        for (key, rows) in loaded {
            // A flow alone in its key is never rewritten (its release deletes the
            // key): its value is not kept.
            let alone = rows.len() == 1;
            let rows: Vec<(i64, Vec<u8>)> = rows
                .iter()
                .map(|r| {
                    g.of.insert(r.id, key);
                    (
                        r.id,
                        if alone {
                            Vec::new()
                        } else {
                            codec::encode_flow(r)
                        },
                    )
                })
                .collect();
            g.groups.insert(key, rows);
        }
        g
    }

    /// Flows held.
    #[cfg(test)]
    pub fn flows(&self) -> usize {
        self.of.len()
    }

    /// Applies one transaction's flow operations and returns its writes: every group
    /// that lost a flow, then the new groups (each named by its first grant, at most
    /// [`GROUP_MAX`] grants each; with `per_flow`, one per grant) — each key once:
    /// etcd refuses a transaction naming a key twice.
    /// A release of a flow no group holds means the store and the books disagree.
    pub fn apply(&mut self, ops: &[FlowOp<'_>]) -> Result<Vec<KeyOp>, String> {
        let cap = if self.per_flow { 1 } else { GROUP_MAX };
        // The group taking this transaction's grants, and how many it took.
        let (mut new, mut taken): (Option<i64>, usize) = (None, 0);
        let mut created = Vec::new();
        // With one key per flow, the values of this transaction's grants.
        let mut fresh = HashMap::new();
        let mut touched = BTreeSet::new();
        for op in ops {
            match op {
                FlowOp::Insert(r) => {
                    if self.of.contains_key(&r.id) {
                        return Err(format!("flow {} was granted twice", r.id));
                    }
                    if new.is_none() || taken == cap {
                        if self.groups.contains_key(&r.id) {
                            return Err(format!("the key of flow {} is already a group's", r.id));
                        }
                        (new, taken) = (Some(r.id), 0);
                        created.push(r.id);
                    }
                    let key = new.expect("a group takes the grant");
                    taken += 1;
                    // One key per flow: the value is written once and never rewritten.
                    let value = codec::encode_flow(r);
                    let kept = if self.per_flow {
                        Vec::new()
                    } else {
                        value.clone()
                    };
                    self.groups.entry(key).or_default().push((r.id, kept));
                    if self.per_flow {
                        fresh.insert(key, value);
                    }
                    self.of.insert(r.id, key);
                }
                FlowOp::Delete(id) => {
                    let key = self.of.remove(id).ok_or_else(|| {
                        format!(
                            "flow {id} was released, but no key of the store holds it: the store and \
                             the books disagree"
                        )
                    })?;
                    let rows = self.groups.get_mut(&key).expect("a flow's group exists");
                    rows.retain(|(f, _)| f != id);
                    if !created.contains(&key) {
                        touched.insert(key);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for key in touched {
            match self.groups.get(&key) {
                Some(rows) if !rows.is_empty() => out.push(KeyOp::Put(key, value(rows))),
                _ => {
                    self.groups.remove(&key);
                    out.push(KeyOp::Delete(key));
                }
            }
        }
        for key in created {
            match self.groups.get(&key) {
                Some(rows) if !rows.is_empty() && self.per_flow => {
                    // The flow's value alone, as the keys of one flow always were.
                    out.push(KeyOp::Put(key, fresh.remove(&key).expect("kept above")))
                }
                Some(rows) if !rows.is_empty() => out.push(KeyOp::Put(key, value(rows))),
                // Every flow it granted was released in the same transaction.
                _ => {
                    self.groups.remove(&key);
                }
            }
        }
        Ok(out)
    }
}

/// A group's value: its flows' values as one JSON array.
fn value(rows: &[(i64, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + rows.iter().map(|(_, b)| b.len() + 1).sum::<usize>());
    v.push(b'[');
    for (i, (_, b)) in rows.iter().enumerate() {
        if i > 0 {
            v.push(b',');
        }
        v.extend_from_slice(b);
    }
    v.push(b']');
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::store::contract::row;

    fn ids(v: &[u8]) -> Vec<i64> {
        codec::decode_flows(v)
            .unwrap()
            .into_iter()
            .map(|(r, ok)| {
                assert!(ok);
                r.id
            })
            .collect()
    }

    #[test]
    fn a_transactions_grants_share_one_key_and_releases_rewrite_or_delete_it() {
        let mut g = Groups::default();
        let (r1, r2, r3) = (row(1), row(2), row(3));
        let ops = g
            .apply(&[
                FlowOp::Insert(&r1),
                FlowOp::Insert(&r2),
                FlowOp::Insert(&r3),
            ])
            .unwrap();
        assert_eq!(ops.len(), 1);
        let KeyOp::Put(1, v) = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(ids(v), [1, 2, 3]);

        // A release and a grant in one transaction: the old group rewritten first.
        let r4 = row(4);
        let ops = g.apply(&[FlowOp::Delete(2), FlowOp::Insert(&r4)]).unwrap();
        assert_eq!(ops.len(), 2);
        let (KeyOp::Put(1, a), KeyOp::Put(4, b)) = (&ops[0], &ops[1]) else {
            panic!("{ops:?}")
        };
        assert_eq!((ids(a), ids(b)), (vec![1, 3], vec![4]));

        // The group's last flows released: its key goes.
        let ops = g.apply(&[FlowOp::Delete(1), FlowOp::Delete(3)]).unwrap();
        assert_eq!(ops, [KeyOp::Delete(1)]);
        assert_eq!(g.flows(), 1);

        // Granted and released in the same transaction: nothing written.
        let r5 = row(5);
        let ops = g.apply(&[FlowOp::Insert(&r5), FlowOp::Delete(5)]).unwrap();
        assert!(ops.is_empty(), "{ops:?}");

        // Releasing what no group holds is the books and the store disagreeing.
        let e = g.apply(&[FlowOp::Delete(9)]).unwrap_err();
        assert!(e.contains("disagree"), "{e}");
        let e = g.apply(&[FlowOp::Insert(&r4)]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn a_transaction_granting_more_than_a_group_holds_fills_several() {
        let mut g = Groups::default();
        let rows: Vec<FlowRow> = (1..=GROUP_MAX as i64 * 2 + 1).map(row).collect();
        let ops: Vec<FlowOp> = rows.iter().map(FlowOp::Insert).collect();
        let out = g.apply(&ops).unwrap();
        let keys: Vec<(i64, usize)> = out
            .iter()
            .map(|k| match k {
                KeyOp::Put(key, v) => (*key, ids(v).len()),
                KeyOp::Delete(_) => panic!("{k:?}"),
            })
            .collect();
        let n = GROUP_MAX as i64;
        assert_eq!(keys, [(1, GROUP_MAX), (n + 1, GROUP_MAX), (2 * n + 1, 1)]);
    }

    #[test]
    fn per_flow_every_grant_has_a_key_of_its_own() {
        let mut g = Groups::new(vec![], true);
        let (r1, r2, r3) = (row(1), row(2), row(3));
        let ops = g
            .apply(&[
                FlowOp::Insert(&r1),
                FlowOp::Insert(&r2),
                FlowOp::Insert(&r3),
                FlowOp::Delete(2),
            ])
            .unwrap();
        let [KeyOp::Put(1, a), KeyOp::Put(3, b)] = &ops[..] else {
            panic!("{ops:?}")
        };
        assert_eq!((ids(a), ids(b)), (vec![1], vec![3]));
        let ops = g.apply(&[FlowOp::Delete(3)]).unwrap();
        assert_eq!(ops, [KeyOp::Delete(3)]);
    }

    #[test]
    fn a_loaded_layout_is_rewritten_from_what_the_load_found() {
        let mut g = Groups::new(vec![(1, vec![row(1), row(3)]), (7, vec![row(7)])], false);
        assert_eq!(g.flows(), 3);
        let ops = g.apply(&[FlowOp::Delete(3), FlowOp::Delete(7)]).unwrap();
        let [KeyOp::Put(1, v), KeyOp::Delete(7)] = &ops[..] else {
            panic!("{ops:?}")
        };
        assert_eq!(ids(v), [1]);
    }
}
