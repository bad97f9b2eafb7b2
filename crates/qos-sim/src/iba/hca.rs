//! The HCAs of a Yum run with their queue pairs (§3.2, Fig 2): one
//! [`ChannelAdapter`] per node, a connected QP pair per real-time connection (its send
//! queue at the source, its receive queue at the destination), a QP per node for
//! control and for best-effort messages, one send and one receive CQ per node. Every
//! packet a consumer hands over is a WQE posted on its QP's send queue; the fabric's
//! DMA takes WQEs in the order of the prioritized QP scheduler ([`QpGate`], the flit
//! network's injection gate); a CQE is posted when a WQE completes (where, the
//! configuration says) and when a message arrives. Without congestion control the consumers
//! poll their CQs at once; credit-based congestion control makes them wait for CQEs.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use qos_core::iba::queues::{ChannelAdapter, CqId, QpId, QpSpec, QueueError, Wqe};
use qos_core::iba::Sl;

use super::config::{Completion, HcaSpec};
use super::traffic::TrafficClass;
use crate::flit::hooks::InjectionGate;

/// Where a packet's WQE sits.
#[derive(Debug, Clone, Copy)]
struct Posted {
    qp: QpId,
    wqe: u64,
}

/// One node's adapter and its standing QPs.
#[derive(Debug)]
struct Node {
    ca: ChannelAdapter,
    send_cq: CqId,
    recv_cq: CqId,
    /// QPs for control and best-effort messages (send and receive).
    control: QpId,
    best_effort: QpId,
    /// With [`Adapters::best_effort_per_destination`]: a best-effort send QP per
    /// destination (empty otherwise).
    best_effort_to: Vec<QpId>,
}

/// Every node's queues.
#[derive(Debug)]
pub struct Adapters {
    nodes: Vec<Node>,
    completion: Completion,
    /// Per connection: its send QP at the source, its receive QP at the destination.
    conn_qp: Vec<(QpId, QpId)>,
    /// Per packet slot of the fabric: its WQE.
    posted: Vec<Option<Posted>>,
    /// Per packet slot: its lane.
    lane: Vec<u8>,
    /// CQEs posted and polled.
    pub send_cqes: u64,
    /// Receive CQEs posted and polled.
    pub recv_cqes: u64,
    /// WQEs refused because a send queue was full.
    pub refused: u64,
    /// Packet slots whose DMA finished since the policy last looked (with
    /// `hca.completion = "dma"` and credit-based congestion control: their CQEs).
    pub dma_completed: Vec<u32>,
    track_dma: bool,
    /// Per (node, QP): WQEs finished before an older one of their QP.
    early: HashMap<(usize, u32), BTreeSet<u64>>,
    /// The DMA serves any QP of a class whose oldest WQE may go
    /// ([`ChannelAdapter::next_send_any_qp`]), not only the class's oldest WQE.
    any_qp: bool,
}

const RECEIVES: u64 = u64::MAX / 4;

impl Adapters {
    /// `nodes` adapters with three classes (control, real time, best effort).
    pub fn new(nodes: u32, spec: &HcaSpec) -> Result<Adapters, QueueError> {
        let mut v = Vec::new();
        for _ in 0..nodes {
            let mut ca = ChannelAdapter::new(3);
            let send_cq = ca.create_cq(spec.cq_depth)?;
            let recv_cq = ca.create_cq(spec.cq_depth)?;
            let mut qp = |class: TrafficClass, sl: u8| -> Result<QpId, QueueError> {
                let q = ca.create_qp(QpSpec {
                    class: class as u8,
                    sl: Sl(sl),
                    send_depth: spec.send_depth,
                    send_cq,
                    recv_cq,
                })?;
                ca.post_recv(q, RECEIVES)?;
                Ok(q)
            };
            let control = qp(TrafficClass::Control, 15)?;
            let best_effort = qp(TrafficClass::BestEffort, 1)?;
            v.push(Node {
                ca,
                send_cq,
                recv_cq,
                control,
                best_effort,
                best_effort_to: Vec::new(),
            });
        }
        Ok(Adapters {
            nodes: v,
            completion: spec.completion,
            conn_qp: Vec::new(),
            posted: Vec::new(),
            lane: Vec::new(),
            send_cqes: 0,
            recv_cqes: 0,
            refused: 0,
            dma_completed: Vec::new(),
            track_dma: false,
            early: HashMap::new(),
            any_qp: false,
        })
    }

    /// Source rate control's firmware (Gulati's NIC keeps a queue per flow): every
    /// node gets a best-effort send QP per destination, and the DMA serves any QP
    /// whose oldest WQE may go, so a flow held back by its rate does not hold back
    /// the others. A node's best-effort QPs together hold at most `hca.send_depth`
    /// WQEs, as its one QP does otherwise.
    pub fn best_effort_per_destination(&mut self, spec: &HcaSpec) -> Result<(), QueueError> {
        let n = self.nodes.len();
        for node in &mut self.nodes {
            node.best_effort_to = (0..n)
                .map(|_| {
                    node.ca.create_qp(QpSpec {
                        class: TrafficClass::BestEffort as u8,
                        sl: Sl(1),
                        send_depth: spec.send_depth,
                        send_cq: node.send_cq,
                        recv_cq: node.recv_cq,
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        self.any_qp = true;
        Ok(())
    }

    /// Keeps the slots of the packets whose DMA finishes ([`Adapters::dma_completed`]).
    pub fn track_dma(&mut self) {
        self.track_dma = true;
    }

    /// Connection `conn` from `src` to `dst` gets its QP pair (connections are opened
    /// in number order).
    pub fn open(
        &mut self,
        conn: u32,
        src: u32,
        dst: u32,
        spec: &HcaSpec,
    ) -> Result<(), QueueError> {
        debug_assert_eq!(conn as usize, self.conn_qp.len());
        let mk = |n: &mut Node| {
            let q = n.ca.create_qp(QpSpec {
                class: TrafficClass::RealTime as u8,
                sl: Sl(0),
                send_depth: spec.send_depth,
                send_cq: n.send_cq,
                recv_cq: n.recv_cq,
            })?;
            n.ca.post_recv(q, RECEIVES)?;
            Ok::<QpId, QueueError>(q)
        };
        let s = mk(&mut self.nodes[src as usize])?;
        let d = mk(&mut self.nodes[dst as usize])?;
        self.conn_qp.push((s, d));
        Ok(())
    }

    fn qp(&self, node: u32, class: TrafficClass, conn: Option<u32>, send: bool, dst: u32) -> QpId {
        let n = &self.nodes[node as usize];
        if send && class == TrafficClass::BestEffort && !n.best_effort_to.is_empty() {
            return n.best_effort_to[dst as usize % n.best_effort_to.len()];
        }
        match (class, conn) {
            (TrafficClass::RealTime, Some(c)) => {
                let (s, d) = self.conn_qp[c as usize];
                if send {
                    s
                } else {
                    d
                }
            }
            (TrafficClass::Control, _) => self.nodes[node as usize].control,
            _ => self.nodes[node as usize].best_effort,
        }
    }

    /// Whether `node` may post another WQE on the QP of this message.
    pub fn has_room(
        &self,
        node: u32,
        class: TrafficClass,
        conn: Option<u32>,
        depth: usize,
    ) -> bool {
        let n = &self.nodes[node as usize];
        if class == TrafficClass::BestEffort && !n.best_effort_to.is_empty() {
            let all: usize = n
                .best_effort_to
                .iter()
                .filter_map(|&q| n.ca.qp(q).ok())
                .map(|q| q.outstanding())
                .sum();
            return all < depth;
        }
        let q = self.qp(node, class, conn, true, 0);
        n.ca.qp(q).is_ok_and(|q| q.outstanding() < depth)
    }

    /// The consumer of `node` posts packet slot `pkt` (`bytes` long, to `dst`) as a
    /// WQE on its QP.
    #[allow(clippy::too_many_arguments)]
    pub fn post(
        &mut self,
        node: u32,
        class: TrafficClass,
        conn: Option<u32>,
        pkt: u32,
        bytes: u64,
        dst: u32,
        now: u64,
    ) -> Result<(), QueueError> {
        let qp = self.qp(node, class, conn, true, dst);
        let wqe = self.nodes[node as usize]
            .ca
            .post_send(qp, bytes, dst, pkt as u64, now)?;
        let i = pkt as usize;
        if self.posted.len() <= i {
            self.posted.resize(i + 1, None);
        }
        self.posted[i] = Some(Posted { qp, wqe });
        Ok(())
    }

    /// The WQE of packet slot `pkt` completed. A QP's WQEs complete in order (their
    /// CQEs are posted in order): one that finishes before an older one of its QP —
    /// packets of one QP on different lanes leave the HCA out of order — waits for it.
    fn complete(&mut self, node: usize, pkt: u32, now: u64) {
        let Some(p) = self.posted.get_mut(pkt as usize).and_then(|p| p.take()) else {
            return;
        };
        let n = &mut self.nodes[node];
        if n.ca.complete_send(p.qp, p.wqe, now).is_err() {
            self.early.entry((node, p.qp.0)).or_default().insert(p.wqe);
            return;
        }
        if let Some(early) = self.early.get_mut(&(node, p.qp.0)) {
            while let Some(&w) = early.first() {
                if n.ca.complete_send(p.qp, w, now).is_err() {
                    break;
                }
                early.pop_first();
            }
        }
        while let Ok(Some(_)) = n.ca.poll(n.send_cq) {
            self.send_cqes += 1;
        }
    }

    /// Packet slot `pkt`'s tail left `node`'s HCA.
    pub fn injected(&mut self, node: usize, pkt: u32, now: u64) {
        if self.completion != Completion::Dma {
            self.complete(node, pkt, now);
        }
    }

    /// A message of `class` (connection `conn`) arrived at `node`: a receive CQE.
    pub fn arrived(
        &mut self,
        node: u32,
        class: TrafficClass,
        conn: Option<u32>,
        bytes: u64,
        now: u64,
    ) {
        let qp = self.qp(node, class, conn, false, node);
        let n = &mut self.nodes[node as usize];
        if n.ca.receive(qp, 0, bytes, 0, now).is_ok() {
            while let Ok(Some(_)) = n.ca.poll(n.recv_cq) {
                self.recv_cqes += 1;
            }
        }
    }
}

/// A policy on the HCAs' DMA: whether a node's DMA may take a data packet
/// into its HCA now — ALO and Self-Tuned ([`super::throttle`]), peak power control's
/// energy budget, source rate control.
/// Control packets never reach a gate.
pub trait DmaGate {
    /// Whether `node` may take a packet of `bytes` and `class` for `dst` at `now`.
    fn allows(&mut self, node: u32, dst: u32, class: u8, bytes: u64, now: u64) -> bool;
    /// `node` took that packet, the fabric's packet `pkt` (every gate allowed it).
    fn taken(&mut self, _node: u32, _pkt: u32, _dst: u32, _class: u8, _bytes: u64, _now: u64) {}
    /// The tail of data packet `pkt` left `node`'s HCA.
    fn injected(&mut self, _node: u32, _pkt: u32, _bytes: u64, _now: u64) {}
}

/// A shared gate.
pub type SharedGate = Rc<RefCell<dyn DmaGate>>;

/// The prioritized QP scheduler as the fabric's injection gate: each node's
/// [`ChannelAdapter::next_send`], whose WQEs are the fabric's packet slots; a data WQE
/// is taken only while every [`DmaGate`] allows it.
pub struct QpGate(pub Rc<RefCell<Adapters>>, pub Vec<SharedGate>);

impl InjectionGate for QpGate {
    fn enqueue(&mut self, _node: usize, _class: usize, pkt: u32, lane: u8, _now: u64) {
        let mut a = self.0.borrow_mut();
        let i = pkt as usize;
        if a.lane.len() <= i {
            a.lane.resize(i + 1, 0);
        }
        a.lane[i] = lane;
    }

    fn pick(&mut self, node: usize, room: &dyn Fn(u8) -> bool, now: u64) -> Option<u32> {
        let mut a = self.0.borrow_mut();
        let a = &mut *a;
        let lanes = &a.lane;
        let gates = &self.1;
        let control = TrafficClass::Control as u8;
        let may_go = |_: QpId, q: &qos_core::iba::queues::QueuePair, w: &Wqe| {
            let class = q.spec().class;
            room(lanes[w.tag as usize])
                && (class == control
                    || gates.iter().all(|g| {
                        g.borrow_mut()
                            .allows(node as u32, w.dest, class, w.bytes, now)
                    }))
        };
        let (qp, w) = if a.any_qp {
            a.nodes[node].ca.next_send_any_qp(may_go)
        } else {
            a.nodes[node].ca.next_send(may_go)
        }?;
        let class = a.nodes[node].ca.qp(qp).map(|q| q.spec().class).ok()?;
        if class != control {
            for g in gates {
                g.borrow_mut()
                    .taken(node as u32, w.tag as u32, w.dest, class, w.bytes, now);
            }
        }
        Some(w.tag as u32)
    }

    fn dma_done(&mut self, node: usize, pkt: u32, now: u64) {
        let mut a = self.0.borrow_mut();
        if a.completion == Completion::Dma {
            a.complete(node, pkt, now);
            if a.track_dma {
                a.dma_completed.push(pkt);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets of one QP on different lanes leave the HCA out of order: the younger
    /// one's WQE waits for the older one's and both leave the send queue (before, the
    /// younger one's completion was refused and its WQE stayed for ever, filling the
    /// send queue at high load).
    #[test]
    fn wqes_finishing_out_of_order_complete_in_order() {
        let spec = HcaSpec {
            completion: Completion::Injected,
            ..HcaSpec::default()
        };
        let a = Rc::new(RefCell::new(Adapters::new(2, &spec).unwrap()));
        let mut gate = QpGate(a.clone(), Vec::new());
        for (slot, lane) in [(0u32, 11u8), (1, 12)] {
            a.borrow_mut()
                .post(0, TrafficClass::BestEffort, None, slot, 640, 1, 0)
                .unwrap();
            gate.enqueue(0, 2, slot, lane, 0);
        }
        assert_eq!(gate.pick(0, &|_| true, 1), Some(0));
        assert_eq!(gate.pick(0, &|_| true, 1), Some(1));
        let depth = 2;
        assert!(!a
            .borrow()
            .has_room(0, TrafficClass::BestEffort, None, depth));
        a.borrow_mut().injected(0, 1, 5);
        assert!(!a
            .borrow()
            .has_room(0, TrafficClass::BestEffort, None, depth));
        a.borrow_mut().injected(0, 0, 6);
        let b = a.borrow();
        let q = b.qp(0, TrafficClass::BestEffort, None, true, 1);
        assert_eq!(b.nodes[0].ca.qp(q).unwrap().outstanding(), 0);
        assert_eq!(b.send_cqes, 2);
    }
}
