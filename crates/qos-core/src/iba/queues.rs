//! Queue pairs, work queue elements and completion queues of one channel adapter (Yum
//! et al. §3.2, Fig 2; IBA vol. 1 §10.2–10.3), with the prioritized QP scheduling the
//! paper adds.
//!
//! A consumer creates completion queues ([`ChannelAdapter::create_cq`]) and queue pairs
//! bound to them ([`ChannelAdapter::create_qp`]): a send queue and a receive queue. A
//! work request becomes a WQE in the QP's send queue ([`ChannelAdapter::post_send`]),
//! and the consumer rings the doorbell of its traffic class: "there is a queue for each
//! traffic class. An application posts a message in the appropriate queue after
//! inserting the WQE in its QP. The CA firmware decides which QP to service in FCFS
//! order based on their priority (traffic class) … Messages of the same class do not
//! get reordered." [`ChannelAdapter::next_send`] is that decision: the lowest-numbered
//! (highest-priority) class whose oldest doorbell may go now. When the HCA has finished
//! a WQE it posts a CQE on the QP's send CQ ([`ChannelAdapter::complete_send`]); an
//! arriving message consumes a posted receive WQE and posts a CQE on the receive CQ
//! ([`ChannelAdapter::receive`]). A full CQ refuses the CQE (IBA: a CQ overrun is an
//! error) and counts it.
//!
//! [`ChannelAdapter::next_send_any_qp`] is the other firmware a source rate control
//! needs (Gulati's thesis §4.2.2, GM's SDMA: a queue per flow, the first due flow
//! served): a QP whose oldest WQE may not go does not hold back the other QPs of its
//! class; a QP's own WQEs still go in order.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use super::Sl;

/// A queue pair, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct QpId(pub u32);

/// A completion queue, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct CqId(pub u32);

/// A work queue element: one message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Wqe {
    /// Unique within the adapter, in posting order.
    pub id: u64,
    /// Message length.
    pub bytes: u64,
    /// Destination node.
    pub dest: u32,
    /// When it was posted (cycle).
    pub posted: u64,
    /// The consumer's own tag (connection and frame, message number…).
    pub tag: u64,
}

/// Which queue a completion belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Completed {
    /// A send WQE finished.
    Send,
    /// A message arrived into a posted receive WQE.
    Receive,
}

/// A completion queue element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cqe {
    /// The queue pair.
    pub qp: QpId,
    /// Send or receive.
    pub kind: Completed,
    /// The send WQE's id (receives: the sender's WQE id as carried by the message).
    pub wqe: u64,
    /// The message's tag.
    pub tag: u64,
    /// Its length.
    pub bytes: u64,
    /// When the CQE was posted (cycle).
    pub at: u64,
}

/// Why a verb failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// No such queue pair.
    #[error("no queue pair #{0}")]
    NoQp(u32),
    /// No such completion queue.
    #[error("no completion queue #{0}")]
    NoCq(u32),
    /// A traffic class beyond those the adapter schedules.
    #[error("traffic class {class} out of range (the adapter has {classes})")]
    NoClass {
        /// Asked for.
        class: u8,
        /// Classes configured.
        classes: usize,
    },
    /// The send queue holds its maximum of WQEs.
    #[error("send queue of QP #{0} is full")]
    SendQueueFull(u32),
    /// A CQ holds its maximum of CQEs: the completion is lost (a CQ overrun).
    #[error("completion queue #{0} overrun")]
    CqOverrun(u32),
    /// A message arrived for a QP with no receive WQE posted (receiver not ready).
    #[error("QP #{0} has no receive WQE posted")]
    ReceiverNotReady(u32),
    /// A completion for a WQE that is not the oldest outstanding one of its QP.
    #[error("WQE {wqe} is not outstanding on QP #{qp}")]
    NotOutstanding {
        /// The QP.
        qp: u32,
        /// The WQE.
        wqe: u64,
    },
    /// A queue of no room.
    #[error("queue capacities must be at least 1")]
    ZeroCapacity,
}

/// A completion queue.
#[derive(Debug, Clone)]
pub struct CompletionQueue {
    entries: VecDeque<Cqe>,
    capacity: usize,
    /// CQEs posted since creation.
    pub posted: u64,
    /// CQEs refused for lack of room.
    pub overruns: u64,
}

impl CompletionQueue {
    /// CQEs waiting to be polled.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Most CQEs it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// How a queue pair is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSpec {
    /// Traffic class: its doorbell queue (0 is served first).
    pub class: u8,
    /// Service level of its packets.
    pub sl: Sl,
    /// Most WQEs in the send queue.
    pub send_depth: usize,
    /// Where send completions go.
    pub send_cq: CqId,
    /// Where receive completions go.
    pub recv_cq: CqId,
}

/// A queue pair.
#[derive(Debug, Clone)]
pub struct QueuePair {
    spec: QpSpec,
    /// Send WQEs posted and not yet completed, oldest first.
    send: VecDeque<Wqe>,
    /// Of those, how many the HCA has taken (the oldest ones).
    taken: usize,
    /// Receive WQEs posted and not yet consumed.
    recv_posted: u64,
}

impl QueuePair {
    /// How it was created.
    pub fn spec(&self) -> &QpSpec {
        &self.spec
    }
    /// Send WQEs outstanding (posted, not completed).
    pub fn outstanding(&self) -> usize {
        self.send.len()
    }
    /// Send WQEs posted and not yet taken by the HCA.
    pub fn waiting(&self) -> usize {
        self.send.len() - self.taken
    }
    /// Receive WQEs posted.
    pub fn receives_posted(&self) -> u64 {
        self.recv_posted
    }
}

/// The queues of one channel adapter and its prioritized QP scheduler.
#[derive(Debug, Clone)]
pub struct ChannelAdapter {
    qps: Vec<QueuePair>,
    cqs: Vec<CompletionQueue>,
    /// Per class, the QPs with WQEs not taken yet, by the id of the oldest of them
    /// (ids grow with posting, so the first entry holds the class's oldest doorbell).
    heads: Vec<BTreeMap<u64, QpId>>,
    /// Per class, WQEs not taken yet.
    waiting: Vec<usize>,
    next_wqe: u64,
}

impl ChannelAdapter {
    /// An adapter scheduling `classes` traffic classes (class 0 first).
    pub fn new(classes: usize) -> Self {
        ChannelAdapter {
            qps: Vec::new(),
            cqs: Vec::new(),
            heads: vec![BTreeMap::new(); classes],
            waiting: vec![0; classes],
            next_wqe: 0,
        }
    }

    /// A completion queue holding at most `capacity` CQEs.
    pub fn create_cq(&mut self, capacity: usize) -> Result<CqId, QueueError> {
        if capacity == 0 {
            return Err(QueueError::ZeroCapacity);
        }
        self.cqs.push(CompletionQueue {
            entries: VecDeque::new(),
            capacity,
            posted: 0,
            overruns: 0,
        });
        Ok(CqId(self.cqs.len() as u32 - 1))
    }

    /// A queue pair.
    pub fn create_qp(&mut self, spec: QpSpec) -> Result<QpId, QueueError> {
        if spec.class as usize >= self.heads.len() {
            return Err(QueueError::NoClass {
                class: spec.class,
                classes: self.heads.len(),
            });
        }
        self.cq(spec.send_cq)?;
        self.cq(spec.recv_cq)?;
        if spec.send_depth == 0 {
            return Err(QueueError::ZeroCapacity);
        }
        self.qps.push(QueuePair {
            spec,
            send: VecDeque::new(),
            taken: 0,
            recv_posted: 0,
        });
        Ok(QpId(self.qps.len() as u32 - 1))
    }

    fn cq(&self, c: CqId) -> Result<&CompletionQueue, QueueError> {
        self.cqs.get(c.0 as usize).ok_or(QueueError::NoCq(c.0))
    }

    /// A completion queue.
    pub fn completion_queue(&self, c: CqId) -> Result<&CompletionQueue, QueueError> {
        self.cq(c)
    }

    /// A queue pair.
    pub fn qp(&self, q: QpId) -> Result<&QueuePair, QueueError> {
        self.qps.get(q.0 as usize).ok_or(QueueError::NoQp(q.0))
    }

    fn qp_mut(&mut self, q: QpId) -> Result<&mut QueuePair, QueueError> {
        self.qps.get_mut(q.0 as usize).ok_or(QueueError::NoQp(q.0))
    }

    /// Posts a send work request on `qp` and rings its class's doorbell. Returns the
    /// WQE's id.
    pub fn post_send(
        &mut self,
        qp: QpId,
        bytes: u64,
        dest: u32,
        tag: u64,
        now: u64,
    ) -> Result<u64, QueueError> {
        let id = self.next_wqe;
        let q = self.qp_mut(qp)?;
        if q.send.len() >= q.spec.send_depth {
            return Err(QueueError::SendQueueFull(qp.0));
        }
        let first = q.taken == q.send.len();
        q.send.push_back(Wqe {
            id,
            bytes,
            dest,
            posted: now,
            tag,
        });
        let class = q.spec.class as usize;
        if first {
            self.heads[class].insert(id, qp);
        }
        self.waiting[class] += 1;
        self.next_wqe += 1;
        Ok(id)
    }

    /// Posts `n` receive WQEs on `qp`.
    pub fn post_recv(&mut self, qp: QpId, n: u64) -> Result<(), QueueError> {
        let q = self.qp_mut(qp)?;
        q.recv_posted = q.recv_posted.saturating_add(n);
        Ok(())
    }

    /// The prioritized QP scheduler: the next WQE the HCA's DMA takes. Classes are
    /// tried in order; within a class only the oldest doorbell is considered (messages
    /// of a class are not reordered), and it is taken if `may_go(qp, wqe)` allows it
    /// (room in the HCA's lane buffer, an injection gate); otherwise the next class is
    /// tried.
    pub fn next_send(
        &mut self,
        mut may_go: impl FnMut(QpId, &QueuePair, &Wqe) -> bool,
    ) -> Option<(QpId, Wqe)> {
        for class in 0..self.heads.len() {
            let Some((_, &qp)) = self.heads[class].first_key_value() else {
                continue;
            };
            let q = &self.qps[qp.0 as usize];
            let wqe = q.send[q.taken];
            if may_go(qp, q, &wqe) {
                return Some(self.take(class, qp));
            }
        }
        None
    }

    /// Like [`ChannelAdapter::next_send`], but within a class every QP with a WQE
    /// waiting is looked at, the one whose oldest WQE is oldest first, and the first
    /// whose oldest WQE may go is served: a QP held back does not hold back the others
    /// (a QP's own WQEs stay in order). Classes are tried in order as there.
    pub fn next_send_any_qp(
        &mut self,
        mut may_go: impl FnMut(QpId, &QueuePair, &Wqe) -> bool,
    ) -> Option<(QpId, Wqe)> {
        for class in 0..self.heads.len() {
            let found = self.heads[class].values().copied().find(|&qp| {
                let q = &self.qps[qp.0 as usize];
                may_go(qp, q, &q.send[q.taken])
            });
            if let Some(qp) = found {
                return Some(self.take(class, qp));
            }
        }
        None
    }

    /// The DMA takes `qp`'s oldest WQE not taken yet (of `class`).
    fn take(&mut self, class: usize, qp: QpId) -> (QpId, Wqe) {
        let q = &mut self.qps[qp.0 as usize];
        let wqe = q.send[q.taken];
        self.heads[class].remove(&wqe.id);
        q.taken += 1;
        if let Some(next) = q.send.get(q.taken) {
            self.heads[class].insert(next.id, qp);
        }
        self.waiting[class] -= 1;
        (qp, wqe)
    }

    /// WQEs waiting for the DMA in `class`.
    pub fn waiting(&self, class: u8) -> usize {
        self.waiting.get(class as usize).copied().unwrap_or(0)
    }

    /// The HCA finished the oldest taken WQE `wqe` of `qp`: it leaves the send queue
    /// and a CQE goes on the QP's send CQ (refused, and counted, when the CQ is full).
    pub fn complete_send(&mut self, qp: QpId, wqe: u64, now: u64) -> Result<Cqe, QueueError> {
        let q = self.qp_mut(qp)?;
        match q.send.front() {
            Some(w) if w.id == wqe && q.taken > 0 => {}
            _ => return Err(QueueError::NotOutstanding { qp: qp.0, wqe }),
        }
        let w = q.send.pop_front().expect("checked above");
        q.taken -= 1;
        let cq = q.spec.send_cq;
        self.post_cqe(
            cq,
            Cqe {
                qp,
                kind: Completed::Send,
                wqe: w.id,
                tag: w.tag,
                bytes: w.bytes,
                at: now,
            },
        )
    }

    /// A message (the sender's WQE `wqe`, `bytes` long, tagged `tag`) arrived for
    /// `qp`: it consumes a receive WQE and posts a CQE on the receive CQ.
    pub fn receive(
        &mut self,
        qp: QpId,
        wqe: u64,
        bytes: u64,
        tag: u64,
        now: u64,
    ) -> Result<Cqe, QueueError> {
        let q = self.qp_mut(qp)?;
        if q.recv_posted == 0 {
            return Err(QueueError::ReceiverNotReady(qp.0));
        }
        q.recv_posted -= 1;
        let cq = q.spec.recv_cq;
        self.post_cqe(
            cq,
            Cqe {
                qp,
                kind: Completed::Receive,
                wqe,
                tag,
                bytes,
                at: now,
            },
        )
    }

    fn post_cqe(&mut self, cq: CqId, e: Cqe) -> Result<Cqe, QueueError> {
        let c = self
            .cqs
            .get_mut(cq.0 as usize)
            .ok_or(QueueError::NoCq(cq.0))?;
        if c.entries.len() >= c.capacity {
            c.overruns += 1;
            return Err(QueueError::CqOverrun(cq.0));
        }
        c.entries.push_back(e);
        c.posted += 1;
        Ok(e)
    }

    /// The consumer polls a CQE.
    pub fn poll(&mut self, cq: CqId) -> Result<Option<Cqe>, QueueError> {
        Ok(self
            .cqs
            .get_mut(cq.0 as usize)
            .ok_or(QueueError::NoCq(cq.0))?
            .entries
            .pop_front())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An adapter with three classes (control, real time, best effort), one CQ, and a
    /// QP per class.
    fn adapter() -> (ChannelAdapter, CqId, [QpId; 3]) {
        let mut a = ChannelAdapter::new(3);
        let cq = a.create_cq(8).unwrap();
        let qp = |a: &mut ChannelAdapter, class| {
            a.create_qp(QpSpec {
                class,
                sl: Sl(class),
                send_depth: 4,
                send_cq: cq,
                recv_cq: cq,
            })
            .unwrap()
        };
        let q = [qp(&mut a, 0), qp(&mut a, 1), qp(&mut a, 2)];
        (a, cq, q)
    }

    #[test]
    fn the_scheduler_serves_higher_classes_first_and_each_class_in_posting_order() {
        let (mut a, _, [ctl, rt, be]) = adapter();
        let b1 = a.post_send(be, 640, 1, 10, 0).unwrap();
        let r1 = a.post_send(rt, 640, 2, 20, 1).unwrap();
        let b2 = a.post_send(be, 640, 3, 11, 2).unwrap();
        let r2 = a.post_send(rt, 640, 2, 21, 3).unwrap();
        let c1 = a.post_send(ctl, 160, 4, 30, 4).unwrap();
        let order: Vec<u64> = std::iter::from_fn(|| a.next_send(|_, _, _| true))
            .map(|(_, w)| w.id)
            .collect();
        assert_eq!(order, vec![c1, r1, r2, b1, b2]);
    }

    #[test]
    fn a_class_whose_oldest_message_cannot_go_lets_lower_classes_through_without_reordering() {
        let (mut a, _, [_, rt, be]) = adapter();
        let r1 = a.post_send(rt, 640, 5, 0, 0).unwrap();
        let r2 = a.post_send(rt, 640, 6, 0, 0).unwrap();
        let b1 = a.post_send(be, 640, 7, 0, 0).unwrap();
        // Destination 5 blocked (its lane buffer full): r2 must not overtake r1.
        let (_, w) = a.next_send(|_, _, w| w.dest != 5).unwrap();
        assert_eq!(w.id, b1);
        assert_eq!(a.next_send(|_, _, w| w.dest != 5), None);
        assert_eq!(a.next_send(|_, _, _| true).unwrap().1.id, r1);
        assert_eq!(a.next_send(|_, _, _| true).unwrap().1.id, r2);
    }

    #[test]
    fn any_qp_scheduling_lets_other_qps_of_a_class_past_a_held_one_but_keeps_each_in_order() {
        let (mut a, cq, [_, rt, be]) = adapter();
        let be2 = a
            .create_qp(QpSpec {
                class: 2,
                sl: Sl(2),
                send_depth: 4,
                send_cq: cq,
                recv_cq: cq,
            })
            .unwrap();
        let x1 = a.post_send(be, 640, 5, 0, 0).unwrap();
        let x2 = a.post_send(be, 640, 6, 0, 0).unwrap();
        let y1 = a.post_send(be2, 640, 7, 0, 0).unwrap();
        let y2 = a.post_send(be2, 640, 5, 0, 0).unwrap();
        let r1 = a.post_send(rt, 640, 5, 0, 0).unwrap();
        assert_eq!(a.waiting(2), 4);
        // Destination 5 held: in-order scheduling is stuck behind x1 (and r1) …
        assert_eq!(a.next_send(|_, _, w| w.dest != 5), None);
        // … any-QP scheduling serves be2's y1, never x2 before x1, nor y2 (dest 5).
        let held = |_: QpId, _: &QueuePair, w: &Wqe| w.dest != 5;
        assert_eq!(a.next_send_any_qp(held).unwrap().1.id, y1);
        assert_eq!(a.next_send_any_qp(held), None);
        assert_eq!(a.waiting(2), 3);
        // Released: oldest heads first, higher class first.
        let order: Vec<u64> = std::iter::from_fn(|| a.next_send_any_qp(|_, _, _| true))
            .map(|(_, w)| w.id)
            .collect();
        assert_eq!(order, vec![r1, x1, x2, y2]);
        assert_eq!(a.waiting(2), 0);
    }

    #[test]
    fn completions_post_cqes_in_order_and_full_queues_refuse() {
        let (mut a, cq, [_, rt, _]) = adapter();
        for i in 0..4 {
            a.post_send(rt, 640, 1, i, 0).unwrap();
        }
        assert_eq!(
            a.post_send(rt, 640, 1, 9, 0),
            Err(QueueError::SendQueueFull(rt.0))
        );
        let (_, w0) = a.next_send(|_, _, _| true).unwrap();
        // Only a taken, oldest WQE completes.
        assert!(a.complete_send(rt, w0.id + 1, 5).is_err());
        let e = a.complete_send(rt, w0.id, 5).unwrap();
        assert_eq!((e.kind, e.tag, e.at), (Completed::Send, 0, 5));
        assert_eq!(a.qp(rt).unwrap().outstanding(), 3);
        // Room again in the send queue.
        a.post_send(rt, 640, 1, 9, 6).unwrap();
        assert_eq!(a.poll(cq).unwrap(), Some(e));
        assert_eq!(a.poll(cq).unwrap(), None);
    }

    #[test]
    fn receives_consume_posted_wqes_and_a_full_cq_counts_its_overruns() {
        let mut a = ChannelAdapter::new(1);
        let cq = a.create_cq(1).unwrap();
        let qp = a
            .create_qp(QpSpec {
                class: 0,
                sl: Sl(0),
                send_depth: 1,
                send_cq: cq,
                recv_cq: cq,
            })
            .unwrap();
        assert_eq!(
            a.receive(qp, 7, 640, 1, 0),
            Err(QueueError::ReceiverNotReady(qp.0))
        );
        a.post_recv(qp, 2).unwrap();
        a.receive(qp, 7, 640, 1, 3).unwrap();
        assert_eq!(
            a.receive(qp, 8, 640, 2, 4),
            Err(QueueError::CqOverrun(cq.0))
        );
        let c = a.completion_queue(cq).unwrap();
        assert_eq!((c.posted, c.overruns, c.len()), (1, 1, 1));
    }

    #[test]
    fn bad_ids_and_classes_are_errors() {
        let mut a = ChannelAdapter::new(2);
        let cq = a.create_cq(1).unwrap();
        let spec = QpSpec {
            class: 2,
            sl: Sl(0),
            send_depth: 1,
            send_cq: cq,
            recv_cq: cq,
        };
        assert_eq!(
            a.create_qp(spec),
            Err(QueueError::NoClass {
                class: 2,
                classes: 2
            })
        );
        assert_eq!(
            a.create_qp(QpSpec {
                class: 0,
                send_cq: CqId(5),
                ..spec
            }),
            Err(QueueError::NoCq(5))
        );
        assert_eq!(a.post_send(QpId(3), 1, 0, 0, 0), Err(QueueError::NoQp(3)));
        assert_eq!(a.create_cq(0), Err(QueueError::ZeroCapacity));
    }
}
