//! The sending side of one connection of a flow: packets kept until the receiving port
//! has taken them, retransmissions marked (SACK holes, time-outs with back-off) for the
//! packet scheduler to let go, the receiver's window, window probes, give-up.

use std::collections::VecDeque;

use qos_core::units::{Duration, Time};

use super::seq::{seq_lt, RetxConfig};
use crate::transport::wire::{AckInfo, ConnIds};

#[derive(Debug, Clone)]
struct InFlight<F> {
    seq: u32,
    frag: F,
    /// Last transmission (the retransmission timer runs from it).
    sent_at: Time,
    /// First transmission.
    first_sent: Time,
    retries: u32,
    /// The receiver has it (cumulatively or selectively acknowledged): never resent,
    /// kept until the port takes it.
    stored: bool,
    fast_retx: bool,
    /// Marked for retransmission, waiting for the scheduler to let it go.
    queued: bool,
}

/// What an acknowledgement meant to the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckVerdict {
    /// Applied.
    Applied,
    /// For another connection, or for data never sent: ignored.
    Stale,
    /// From another receiver instance than the one this connection has heard from: the
    /// receiver lost its state (restarted). Nothing was applied.
    PeerRestarted,
}

/// The peer has not answered for [`RetxConfig::give_up`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GaveUp;

/// Sender side of one connection of a flow. `F` is whatever the caller needs to re-emit
/// a packet (a message handle and an offset, typically).
#[derive(Debug)]
pub struct SendFlow<F> {
    cfg: RetxConfig,
    conn: u32,
    /// The receiver instance heard from (0: no ack yet).
    peer_rid: u32,
    next_seq: u32,
    window: u32,
    /// Packets sent and not yet taken by the receiving port, in sequence order.
    inflight: VecDeque<InFlight<F>>,
    /// Sequences marked for retransmission, oldest mark first (entries whose packet
    /// arrived meanwhile are skipped).
    resend: VecDeque<u32>,
    /// Packets marked for retransmission.
    queued: usize,
    last_probe: Option<Time>,
    /// When the first probe nobody has answered yet went out.
    probing_since: Option<Time>,
    /// Smoothed round trip and its mean deviation, ps (RFC 6298), from packets acked
    /// without a retransmission (Karn's rule).
    srtt: Option<u64>,
    rttvar: u64,
    /// Current base timeout, ps: srtt + max(cfg.rto, 4·rttvar), at most cfg.max_rto.
    rto: u64,
    /// Retransmissions marked (for statistics): on SACK holes and on time-outs.
    pub fast_retransmits: u64,
    pub timeouts: u64,
}

impl<F: Clone> SendFlow<F> {
    /// A new connection `conn` (non-zero); the receiver's initial window is
    /// `initial_window` packets.
    pub fn new(cfg: RetxConfig, initial_window: u32, conn: u32) -> Self {
        SendFlow {
            cfg,
            conn,
            peer_rid: 0,
            next_seq: 0,
            window: initial_window,
            inflight: VecDeque::new(),
            resend: VecDeque::new(),
            queued: 0,
            last_probe: None,
            probing_since: None,
            srtt: None,
            rttvar: 0,
            rto: cfg.rto.as_ps(),
            fast_retransmits: 0,
            timeouts: 0,
        }
    }

    /// The ids this connection's packets carry.
    pub fn ids(&self) -> ConnIds {
        ConnIds {
            conn: self.conn,
            rid: self.peer_rid,
        }
    }

    /// The current base retransmission timeout: at least the configured one, more when
    /// the measured round trip (queues in shapers and switches included) is longer, so
    /// that a slow path is not flooded with spurious retransmissions.
    pub fn rto(&self) -> Duration {
        Duration::from_ps(self.rto)
    }

    fn rtt_sample(&mut self, r: u64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(r)) / 4;
                self.srtt = Some((7 * srtt + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        // RFC 6298's srtt + max(G, 4·rttvar), with the configured timeout as G: a
        // steady queue (rttvar → 0) still leaves that much margin over the round trip.
        self.rto = srtt
            .saturating_add((4 * self.rttvar).max(self.cfg.rto.as_ps()))
            .min(self.cfg.max_rto.as_ps());
    }

    /// New packets the receiver's window lets go now.
    pub fn room(&self) -> u32 {
        let r = self.window.wrapping_sub(self.next_seq);
        if (r as i32) > 0 {
            r
        } else {
            0
        }
    }

    /// May a new packet be sent now (is it inside the receiver's window)?
    pub fn can_send(&self) -> bool {
        self.room() > 0
    }

    /// Packets sent and not yet taken by the receiving port.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Packets marked for retransmission and not yet resent.
    pub fn resends_pending(&self) -> usize {
        self.queued
    }

    /// Records a new packet as sent at `now`; returns its sequence number.
    pub fn on_send(&mut self, now: Time, frag: F) -> u32 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.inflight.push_back(InFlight {
            seq,
            frag,
            sent_at: now,
            first_sent: now,
            retries: 0,
            stored: false,
            fast_retx: false,
            queued: false,
        });
        seq
    }

    /// The oldest packet marked for retransmission, recorded as resent at `now` (its
    /// timer restarts): what to put on the wire when the scheduler grants the flow a
    /// packet.
    pub fn next_resend(&mut self, now: Time) -> Option<(u32, F)> {
        while let Some(seq) = self.resend.pop_front() {
            let Some(p) = self.inflight.iter_mut().find(|p| p.seq == seq) else {
                continue;
            };
            if !p.queued {
                continue;
            }
            p.queued = false;
            p.sent_at = now;
            self.queued -= 1;
            return Some((seq, p.frag.clone()));
        }
        None
    }

    fn mark(&mut self, idx: usize) {
        let p = &mut self.inflight[idx];
        if !p.queued {
            p.queued = true;
            self.queued += 1;
            self.resend.push_back(p.seq);
        }
    }

    /// The receiver has packet `idx`.
    fn store(&mut self, idx: usize) {
        let p = &mut self.inflight[idx];
        p.stored = true;
        if p.queued {
            p.queued = false;
            self.queued -= 1;
        }
    }

    /// Applies an acknowledgement for connection `ids.conn` from receiver `ids.rid`.
    /// Every fragment the receiving port has newly taken is passed to `delivered`, in
    /// order; SACK holes are marked for retransmission.
    pub fn on_ack(
        &mut self,
        now: Time,
        ids: ConnIds,
        ack: AckInfo,
        mut delivered: impl FnMut(F),
    ) -> AckVerdict {
        let AckInfo {
            cum,
            window,
            sack,
            delivered: taken,
        } = ack;
        // Another connection's, or for data never sent (hostile or corrupt peer).
        if ids.conn != self.conn || seq_lt(self.next_seq, cum) {
            return AckVerdict::Stale;
        }
        if self.peer_rid == 0 {
            self.peer_rid = ids.rid;
        } else if ids.rid != self.peer_rid {
            return AckVerdict::PeerRestarted;
        }
        self.probing_since = None;
        if seq_lt(self.window, window) {
            self.window = window;
        }
        let mut sample = None;
        for i in 0..self.inflight.len() {
            let p = &self.inflight[i];
            if !seq_lt(p.seq, cum) {
                break;
            }
            if !p.stored {
                if p.retries == 0 && !p.fast_retx {
                    sample = Some(now.saturating_since(p.sent_at).as_ps());
                }
                self.store(i);
            }
        }
        if let Some(r) = sample {
            self.rtt_sample(r);
        }
        if sack != 0 {
            let mut highest = None;
            for i in 0..self.inflight.len() {
                let d = self.inflight[i].seq.wrapping_sub(cum);
                if (1..=64).contains(&d) && sack & (1u64 << (d - 1)) != 0 {
                    self.store(i);
                    highest = Some(d);
                }
            }
            if let Some(h) = highest {
                for i in 0..self.inflight.len() {
                    let p = &mut self.inflight[i];
                    let d = p.seq.wrapping_sub(cum);
                    if seq_lt(p.seq, cum) {
                        continue;
                    }
                    if d >= h {
                        break;
                    }
                    if !p.stored && !p.fast_retx && !p.queued && h - d >= self.cfg.dup_threshold {
                        p.fast_retx = true;
                        self.fast_retransmits += 1;
                        self.mark(i);
                    }
                }
            }
        }
        // Taken by the port: never beyond what arrived.
        let taken = if seq_lt(cum, taken) { cum } else { taken };
        while self.inflight.front().is_some_and(|p| seq_lt(p.seq, taken)) {
            let p = self.inflight.pop_front().expect("front exists");
            delivered(p.frag);
        }
        AckVerdict::Applied
    }

    fn timeout(&self, retries: u32) -> Duration {
        let scaled = self.rto.saturating_mul(1u64 << retries.min(16));
        Duration::from_ps(scaled.min(self.cfg.max_rto.as_ps()))
    }

    /// Marks the packets whose retransmission timer has expired at `now`; returns how
    /// many. Gives up when such a packet was first sent [`RetxConfig::give_up`] ago.
    pub fn due_retransmits(&mut self, now: Time) -> Result<usize, GaveUp> {
        let mut marked = 0;
        for i in 0..self.inflight.len() {
            let t = self.timeout(self.inflight[i].retries);
            let p = &mut self.inflight[i];
            if p.stored || p.queued || p.sent_at.saturating_add(t) > now {
                continue;
            }
            if now.saturating_since(p.first_sent) >= self.cfg.give_up {
                return Err(GaveUp);
            }
            p.retries += 1;
            p.fast_retx = false;
            self.timeouts += 1;
            self.mark(i);
            marked += 1;
        }
        Ok(marked)
    }

    /// Should a probe be sent now? Only when no packet awaits an acknowledgement (so no
    /// ack will come by itself) and the flow waits on the receiver: for its window to
    /// open (`has_pending` new packets, window closed) or for its port to take packets
    /// it holds. At most one a timeout. Gives up when probes have gone unanswered for
    /// [`RetxConfig::give_up`].
    pub fn probe_due(&mut self, now: Time, has_pending: bool) -> Result<bool, GaveUp> {
        let unacked = self.inflight.iter().any(|p| !p.stored);
        let waiting = (has_pending && !self.can_send()) || !self.inflight.is_empty();
        if unacked || !waiting {
            self.last_probe = None;
            self.probing_since = None;
            return Ok(false);
        }
        match self.last_probe {
            Some(t) if t.saturating_add(self.cfg.rto) > now => Ok(false),
            Some(_) => {
                let since = *self.probing_since.get_or_insert(now);
                if now.saturating_since(since) >= self.cfg.give_up {
                    return Err(GaveUp);
                }
                self.last_probe = Some(now);
                Ok(true)
            }
            None => {
                self.last_probe = Some(now);
                Ok(false)
            }
        }
    }

    /// Earliest time a timer of this flow fires.
    pub fn next_timer(&self) -> Option<Time> {
        let retx = self
            .inflight
            .iter()
            .filter(|p| !p.stored && !p.queued)
            .map(|p| p.sent_at.saturating_add(self.timeout(p.retries)))
            .min();
        let probe = self.last_probe.map(|t| t.saturating_add(self.cfg.rto));
        match (retx, probe) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
